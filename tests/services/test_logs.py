"""Structured logs: context fields on the lines of any logger, in both formats, across threads."""

from __future__ import annotations

import contextvars
import io
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator

import pytest

from hoodied.logs import NOISY_LOGGERS, ContextFilter, current_fields, log_context, setup_logging

TEXT_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<level>[A-Z]+) (?P<logger>\S+) "
    r"(?:\[(?P<fields>[^\]]*)\] )?(?P<msg>.*)$"
)


@pytest.fixture
def install() -> Iterator[Callable[..., io.StringIO]]:
    """``install(level=..., fmt=...)`` runs setup_logging into a fresh buffer; the root logger and the noisy
    loggers are restored afterwards."""
    root = logging.getLogger()
    saved_level = root.level
    saved_noisy = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    installed: list[logging.Handler] = []

    def install(level: str = "INFO", fmt: str = "text", **kwargs: bool) -> io.StringIO:
        stream = io.StringIO()
        installed.append(setup_logging(level, fmt, stream, **kwargs))
        return stream

    yield install
    for handler in installed:
        root.removeHandler(handler)
        handler.close()
    root.setLevel(saved_level)
    for name, level in saved_noisy.items():
        logging.getLogger(name).setLevel(level)


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


# -- the context ---------------------------------------------------------------------------------------------


def test_contexts_nest_and_restore() -> None:
    assert current_fields() == {}
    with log_context(table="orders") as outer:
        assert outer == {"table": "orders"}
        with log_context(action="compaction", instant="20261123093000000") as inner:
            assert dict(inner) == {"table": "orders", "action": "compaction", "instant": "20261123093000000"}
            with log_context(table="users"):
                assert current_fields()["table"] == "users"
            assert current_fields()["table"] == "orders"
        assert current_fields() == {"table": "orders"}
    assert current_fields() == {}


def test_fields_are_restored_when_the_block_raises() -> None:
    with pytest.raises(KeyError), log_context(table="orders"):
        raise KeyError("x")
    assert current_fields() == {}


@pytest.mark.parametrize("name", ["msg", "name", "levelname", "exc_info", "ts", "level", "logger", "hoodied"])
def test_reserved_field_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match=name), log_context(**{name: "x"}):
        pass


def test_threads_get_the_context_only_when_given_it() -> None:
    seen: dict[str, dict[str, str]] = {}

    def record(key: str) -> None:
        seen[key] = dict(current_fields())

    with log_context(table="orders", instant="1"):
        plain = threading.Thread(target=record, args=("plain",))
        copied = threading.Thread(target=contextvars.copy_context().run, args=(record, "copied"))
        plain.start()
        copied.start()
        plain.join()
        copied.join()
    assert seen == {"plain": {}, "copied": {"table": "orders", "instant": "1"}}


def test_contexts_of_threads_are_their_own() -> None:
    barrier = threading.Barrier(2)
    seen: dict[str, str] = {}

    def work(table: str) -> None:
        with log_context(table=table):
            barrier.wait()  # both threads inside their context at once
            seen[table] = current_fields()["table"]

    threads = [threading.Thread(target=work, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": "a", "b": "b"}


def test_filter_sets_the_dict_and_attributes() -> None:
    record = logging.LogRecord("hoodie.timeline", logging.INFO, __file__, 1, "m", None, None)
    record.table = "explicit"  # as extra={"table": ...} does
    with log_context(table="orders", instant="1"):
        assert ContextFilter().filter(record)
    assert record.__dict__["hoodied"] == {"table": "explicit", "instant": "1"}
    assert (record.__dict__["table"], record.__dict__["instant"]) == ("explicit", "1")


# -- text and JSON lines -------------------------------------------------------------------------------------


def test_text_lines_carry_the_context_of_any_module(install: Callable[..., io.StringIO]) -> None:
    stream = install()
    with log_context(table="orders"), log_context(action="compaction", instant="20261123093000000"):
        logging.getLogger("hoodie.timeline.loader").info("read %d instants", 12)
    logging.getLogger("hoodied.supervisor").warning("outside")
    first, second = lines(stream)
    m = TEXT_LINE.match(first)
    assert m is not None, first
    assert m["level"] == "INFO"
    assert m["logger"] == "hoodie.timeline.loader"
    assert m["fields"] == "table=orders action=compaction instant=20261123093000000"
    assert m["msg"] == "read 12 instants"
    assert re.fullmatch(r"\S+ WARNING hoodied\.supervisor outside", second)


def test_text_quotes_values_with_spaces(install: Callable[..., io.StringIO]) -> None:
    stream = install()
    with log_context(table="my table", instant=""):
        logging.getLogger("hoodied.x").info("m")
    assert '[table="my table" instant=""] m' in stream.getvalue()


def test_text_tracebacks_follow_the_line(install: Callable[..., io.StringIO]) -> None:
    stream = install()
    with log_context(table="orders"):
        try:
            raise ValueError("bad block")
        except ValueError:
            logging.getLogger("hoodie.log.reader").exception("cannot read")
    first, *rest = lines(stream)
    assert first.endswith("hoodie.log.reader [table=orders] cannot read")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "ValueError: bad block"


def test_json_lines(install: Callable[..., io.StringIO]) -> None:
    stream = install(fmt="json")
    with log_context(table="orders", action="clean", instant="20261123093000000"):
        logging.getLogger("hoodie.clean.planner").info("planned %s", "3 deletes\nand more")
        try:
            raise RuntimeError("lost")
        except RuntimeError:
            logging.getLogger("hoodied.jobs").error("job failed", exc_info=True)
    logging.getLogger("hoodied.cli").info("bye")
    first, second, third = (json.loads(line) for line in lines(stream))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first.pop("ts"))
    assert first == {
        "level": "INFO",
        "logger": "hoodie.clean.planner",
        "msg": "planned 3 deletes\nand more",
        "table": "orders",
        "action": "clean",
        "instant": "20261123093000000",
    }
    assert second["msg"] == "job failed"
    assert second["table"] == "orders"
    assert second["exc_info"].startswith("Traceback (most recent call last):")
    assert second["exc_info"].endswith("RuntimeError: lost")
    assert set(third) == {"ts", "level", "logger", "msg"}


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_lines_from_a_thread_run_in_a_copied_context(install: Callable[..., io.StringIO], fmt: str) -> None:
    stream = install(fmt=fmt)
    log = logging.getLogger("hoodie.compaction.executor")
    with log_context(table="orders", instant="20261123093000000"):
        copied = threading.Thread(target=contextvars.copy_context().run, args=(log.info, "in a copy"))
        plain = threading.Thread(target=log.info, args=("in a plain thread",))
        copied.start()
        copied.join()
        plain.start()
        plain.join()
    copied_line, plain_line = lines(stream)
    if fmt == "json":
        assert json.loads(copied_line)["instant"] == "20261123093000000"
        assert "instant" not in json.loads(plain_line)
    else:
        assert "[table=orders instant=20261123093000000] in a copy" in copied_line
        assert "[" not in plain_line


# -- setup ---------------------------------------------------------------------------------------------------


def test_setup_is_idempotent(install: Callable[..., io.StringIO]) -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    first = install()
    second = install(level="debug")
    after = [h for h in root.handlers if h not in before]
    assert len(after) == 1  # the second call replaced the first's handler
    assert root.level == logging.DEBUG
    logging.getLogger("hoodied.x").debug("once")
    assert first.getvalue() == ""
    assert len(lines(second)) == 1


def test_levels(install: Callable[..., io.StringIO]) -> None:
    stream = install(level="WARNING")
    logging.getLogger("hoodied.x").info("hidden")
    logging.getLogger("hoodied.x").warning("shown")
    assert [line.split(" ", 3)[3] for line in lines(stream)] == ["shown"]


def test_noisy_loggers_are_quiet(install: Callable[..., io.StringIO]) -> None:
    stream = install(level="DEBUG")
    for name in ("kazoo.client", "py4j.clientserver", "apscheduler.scheduler"):
        logging.getLogger(name).info("chatter")
        logging.getLogger(name).warning("worth knowing")
    assert [line.split(" ", 3)[2:] for line in lines(stream)] == [
        ["kazoo.client", "worth knowing"],
        ["py4j.clientserver", "worth knowing"],
        ["apscheduler.scheduler", "worth knowing"],
    ]
    install(level="ERROR")
    assert logging.getLogger("kazoo.client").level == logging.ERROR  # never louder than asked
    install(level="DEBUG", quiet=False)
    assert logging.getLogger("kazoo.client").level == logging.ERROR  # quiet=False leaves them be


@pytest.mark.parametrize(("level", "fmt", "named"), [("LOUD", "text", "'LOUD'"), ("INFO", "xml", "'xml'")])
def test_bad_level_or_format(install: Callable[..., io.StringIO], level: str, fmt: str, named: str) -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    with pytest.raises(ValueError, match=named):
        install(level=level, fmt=fmt)
    assert root.handlers == before
