"""Compaction plan strategies (``hoodie.compaction.strategy``): names, configuration, partition filtering,
ordering and IO bounds, and the per-slice metrics, with Hudi's semantics.

Everything here is pure: file slices and operations are built directly, no table or storage is involved.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hoodie.compaction.strategy import (
    DEFAULT_STRATEGY,
    STRATEGY,
    TOTAL_IO_MB,
    TOTAL_IO_READ_MB,
    TOTAL_IO_WRITE_MB,
    TOTAL_LOG_FILES,
    TOTAL_LOG_FILES_SIZE,
    CompactionConfig,
    Strategy,
)
from hoodie.errors import InvalidWriteConfig
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId, FileSlice
from hoodie.log.log_file import LogFile
from hoodie.timeline.metadata import CompactionOperation

MB = 1024 * 1024
PACKAGE = "org.apache.hudi.table.action.compact.strategy."
BASE_INSTANT = "20240101000000000"

TARGET_IO = "hoodie.compaction.target.io"
SIZE_THRESHOLD = "hoodie.compaction.logfile.size.threshold"
NUM_THRESHOLD = "hoodie.compaction.logfile.num.threshold"
DAY_PARTITIONS = "hoodie.compaction.daybased.target.partitions"
REGEX = "hoodie.compaction.partition.path.regex"
MAX_FILE_SIZE = "hoodie.parquet.max.file.size"


# -- builders ------------------------------------------------------------------------------------------------


def make_slice(
    base_bytes: int | None,
    log_bytes: Sequence[int] = (),
    *,
    file_id: str = "f1-0",
    partition: str = "2024/01/01",
) -> FileSlice:
    """A slice with a base file of ``base_bytes`` (None: no base file) and one log file per size."""
    base = None if base_bytes is None else BaseFile(file_id, "1-0-1", BASE_INSTANT)
    logs = tuple(
        LogFile.parse(f".{file_id}_{BASE_INSTANT}.log.{n}_0-1-0") for n in range(1, len(log_bytes) + 1)
    )
    return FileSlice(
        FileGroupId(partition, file_id),
        BASE_INSTANT,
        base,
        0 if base_bytes is None else base_bytes,
        logs,
        tuple(log_bytes),
    )


def make_op(
    file_id: str,
    *,
    io: float = 0.0,
    log_size: float = 0.0,
    log_files: float = 0.0,
    partition: str = "2024/01/01",
) -> CompactionOperation:
    return CompactionOperation(
        BASE_INSTANT,
        file_id,
        partition,
        metrics={TOTAL_LOG_FILES: log_files, TOTAL_IO_MB: io, TOTAL_LOG_FILES_SIZE: log_size},
    )


def ids(ops: Sequence[CompactionOperation]) -> list[str]:
    return [o.file_id for o in ops]


# -- Strategy.parse -----------------------------------------------------------------------------------------

SHORT_NAMES = {
    Strategy.LOG_FILE_SIZE_BASED: "LogFileSizeBased",
    Strategy.LOG_FILE_NUM_BASED: "LogFileNumBased",
    Strategy.BOUNDED_IO: "BoundedIO",
    Strategy.DAY_BASED: "DayBased",
    Strategy.UNBOUNDED: "UnBounded",
    Strategy.PARTITION_REGEX: "PartitionRegexBased",
}


def test_the_short_partition_regex_name_is_still_accepted() -> None:
    assert Strategy.parse("PartitionRegex") is Strategy.PARTITION_REGEX
    assert Strategy.PARTITION_REGEX.class_name == f"{PACKAGE}PartitionRegexBasedCompactionStrategy"


def test_every_strategy_has_a_short_name_here() -> None:
    assert set(SHORT_NAMES) == set(Strategy)
    assert [s.value for s in Strategy] == list(SHORT_NAMES.values())


@pytest.mark.parametrize(
    ("name", "expected"),
    [(f"{PACKAGE}{short}CompactionStrategy", s) for s, short in SHORT_NAMES.items()]
    + [(f"{short}CompactionStrategy", s) for s, short in SHORT_NAMES.items()]
    + [(short, s) for s, short in SHORT_NAMES.items()],
)
def test_parse_hudi_class_simple_and_short_names(name: str, expected: Strategy) -> None:
    assert Strategy.parse(name) is expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("logfilesizebased", Strategy.LOG_FILE_SIZE_BASED),
        ("LOGFILENUMBASED", Strategy.LOG_FILE_NUM_BASED),
        ("boundedio", Strategy.BOUNDED_IO),
        ("dAyBaSeD", Strategy.DAY_BASED),
        ("Unbounded", Strategy.UNBOUNDED),
        ("partitionregex", Strategy.PARTITION_REGEX),
        ("  DayBased\t", Strategy.DAY_BASED),
        (f"  {PACKAGE}UnBoundedCompactionStrategy\n", Strategy.UNBOUNDED),
        ("UnboundedCompactionStrategy", Strategy.UNBOUNDED),
        (f"{PACKAGE}boundedioCompactionStrategy", Strategy.BOUNDED_IO),
    ],
)
def test_parse_is_case_insensitive_and_strips(name: str, expected: Strategy) -> None:
    assert Strategy.parse(name) is expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("logfilesizebasedcompactionstrategy", Strategy.LOG_FILE_SIZE_BASED),
        ("BOUNDEDIOCOMPACTIONSTRATEGY", Strategy.BOUNDED_IO),
        (f"{PACKAGE}daybasedcompactionstrategy", Strategy.DAY_BASED),
    ],
)
def test_parse_is_case_insensitive_for_the_compaction_strategy_suffix(name: str, expected: Strategy) -> None:
    assert Strategy.parse(name) is expected


@pytest.mark.parametrize("strategy", list(Strategy))
def test_class_name_is_hudis_and_parses_back(strategy: Strategy) -> None:
    assert strategy.class_name == f"{PACKAGE}{SHORT_NAMES[strategy]}CompactionStrategy"
    assert Strategy.parse(strategy.class_name) is strategy
    assert Strategy.parse(strategy.value) is strategy


def test_log_file_size_based_is_the_default() -> None:
    assert DEFAULT_STRATEGY is Strategy.LOG_FILE_SIZE_BASED
    assert STRATEGY == "hoodie.compaction.strategy"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        "CompactionStrategy",
        f"{PACKAGE}CompactionStrategy",
        "LogFileSize",
        "LogFileSizeBasedStrategy",
        "BoundedPartitionAwareCompactionStrategy",
        f"{PACKAGE}UnBoundedPartitionAwareCompactionStrategy",
        f"{PACKAGE}DayBasedAndBoundedIOCompactionStrategy",
        f"{PACKAGE}LogFileSizeThresholdBasedCompactionStrategy",
        "SpecificPartitionCompactionStrategy",
        "CompositeCompactionStrategy",
        "LogFileSizeBasedCompactionStrategy.",
        "Log File Size Based",
        "LOG_FILE_SIZE_BASED",
    ],
)
def test_parse_refuses_other_names_naming_the_key_and_value(name: str) -> None:
    with pytest.raises(InvalidWriteConfig) as excinfo:
        Strategy.parse(name)
    message = str(excinfo.value)
    assert "hoodie.compaction.strategy" in message
    assert repr(name) in message


# -- CompactionConfig.from_config ---------------------------------------------------------------------------


def test_from_empty_config_takes_hudis_defaults() -> None:
    config = CompactionConfig.from_config({})
    assert config == CompactionConfig()
    assert config.strategy is Strategy.LOG_FILE_SIZE_BASED
    assert config.target_io_mb == 512000
    assert config.log_file_size_threshold == 0
    assert config.log_file_num_threshold == 0
    assert config.day_based_target_partitions == 10
    assert config.partition_regex is None
    assert config.max_file_bytes == 120 * MB


def test_from_config_reads_every_key() -> None:
    config = CompactionConfig.from_config(
        {
            STRATEGY: f"{PACKAGE}DayBasedCompactionStrategy",
            TARGET_IO: "2048",
            SIZE_THRESHOLD: "1048576",
            NUM_THRESHOLD: "3",
            DAY_PARTITIONS: "7",
            REGEX: r"^2024/",
            MAX_FILE_SIZE: str(64 * MB),
            "hoodie.some.other.key": "left to its owner",
        }
    )
    assert config == CompactionConfig(
        strategy=Strategy.DAY_BASED,
        target_io_mb=2048,
        log_file_size_threshold=1048576,
        log_file_num_threshold=3,
        day_based_target_partitions=7,
        partition_regex=r"^2024/",
        max_file_bytes=64 * MB,
    )


@pytest.mark.parametrize(
    ("key", "raw", "attribute", "expected"),
    [
        (TARGET_IO, " 100 ", "target_io_mb", 100),
        (TARGET_IO, "0", "target_io_mb", 0),
        (TARGET_IO, "", "target_io_mb", 512000),
        (TARGET_IO, "  ", "target_io_mb", 512000),
        (TARGET_IO, "9999999999", "target_io_mb", 9999999999),
        (SIZE_THRESHOLD, "0", "log_file_size_threshold", 0),
        (SIZE_THRESHOLD, "\t5\n", "log_file_size_threshold", 5),
        (SIZE_THRESHOLD, "", "log_file_size_threshold", 0),
        (NUM_THRESHOLD, "0", "log_file_num_threshold", 0),
        (NUM_THRESHOLD, "12", "log_file_num_threshold", 12),
        (DAY_PARTITIONS, "1", "day_based_target_partitions", 1),
        (DAY_PARTITIONS, "", "day_based_target_partitions", 10),
        (MAX_FILE_SIZE, "1", "max_file_bytes", 1),
        (MAX_FILE_SIZE, "", "max_file_bytes", 120 * MB),
    ],
)
def test_from_config_integer_values(key: str, raw: str, attribute: str, expected: int) -> None:
    assert getattr(CompactionConfig.from_config({key: raw}), attribute) == expected


def test_from_config_empty_strategy_is_the_default() -> None:
    assert CompactionConfig.from_config({STRATEGY: ""}).strategy is Strategy.LOG_FILE_SIZE_BASED


def test_from_config_empty_regex_is_no_regex() -> None:
    assert CompactionConfig.from_config({REGEX: ""}).partition_regex is None


def test_from_config_bad_strategy_names_the_key() -> None:
    with pytest.raises(InvalidWriteConfig, match=r"hoodie\.compaction\.strategy='Nope'"):
        CompactionConfig.from_config({STRATEGY: "Nope"})


@pytest.mark.parametrize("key", [TARGET_IO, SIZE_THRESHOLD, NUM_THRESHOLD, DAY_PARTITIONS, MAX_FILE_SIZE])
@pytest.mark.parametrize("raw", ["abc", "1.5", "1e3", "0x10", "10MB", "--1"])
def test_from_config_refuses_non_integers_naming_key_and_value(key: str, raw: str) -> None:
    with pytest.raises(InvalidWriteConfig) as excinfo:
        CompactionConfig.from_config({key: raw})
    message = str(excinfo.value)
    assert key in message
    assert repr(raw) in message


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        (TARGET_IO, "-1"),
        (SIZE_THRESHOLD, "-1"),
        (NUM_THRESHOLD, "-5"),
        (DAY_PARTITIONS, "0"),
        (DAY_PARTITIONS, "-1"),
        (MAX_FILE_SIZE, "0"),
        (MAX_FILE_SIZE, "-1048576"),
    ],
)
def test_from_config_refuses_out_of_range_values_naming_key_and_value(key: str, raw: str) -> None:
    with pytest.raises(InvalidWriteConfig) as excinfo:
        CompactionConfig.from_config({key: raw})
    message = str(excinfo.value)
    assert key in message
    assert repr(raw) in message


@pytest.mark.parametrize(
    "config",
    [
        {STRATEGY: "PartitionRegex"},
        {STRATEGY: f"{PACKAGE}PartitionRegexBasedCompactionStrategy", REGEX: ""},
    ],
)
def test_partition_regex_strategy_needs_a_regex(config: dict[str, str]) -> None:
    with pytest.raises(InvalidWriteConfig) as excinfo:
        CompactionConfig.from_config(config)
    message = str(excinfo.value)
    assert STRATEGY in message
    assert REGEX in message


def test_partition_regex_strategy_needs_a_regex_when_built_directly() -> None:
    with pytest.raises(InvalidWriteConfig, match=r"hoodie\.compaction\.partition\.path\.regex"):
        CompactionConfig(strategy=Strategy.PARTITION_REGEX)


@pytest.mark.parametrize("strategy", ["PartitionRegex", "UnBounded", "LogFileSizeBased"])
@pytest.mark.parametrize("regex", ["(", "[a-", "*2024", "(?P<x>a)(?P<x>b)"])
def test_bad_regex_is_refused_naming_key_and_value(strategy: str, regex: str) -> None:
    with pytest.raises(InvalidWriteConfig) as excinfo:
        CompactionConfig.from_config({STRATEGY: strategy, REGEX: regex})
    message = str(excinfo.value)
    assert REGEX in message
    assert repr(regex) in message


def test_partition_regex_strategy_with_regex_is_accepted() -> None:
    config = CompactionConfig.from_config({STRATEGY: "PartitionRegex", REGEX: "2024/0[12]"})
    assert config.strategy is Strategy.PARTITION_REGEX
    assert config.partition_regex == "2024/0[12]"


# -- filter_partitions ---------------------------------------------------------------------------------------

PARTITIONS = ["2024/01/01", "2024/02/01", "2023/02/01", "archive/2024/02/01", "2024/02/15"]


@pytest.mark.parametrize(
    "strategy", [s for s in Strategy if s not in (Strategy.DAY_BASED, Strategy.PARTITION_REGEX)]
)
def test_without_regex_every_partition_is_kept_in_order(strategy: Strategy) -> None:
    partitions = ("b", "a", "americas/us", "", "c")
    kept = CompactionConfig(strategy=strategy).filter_partitions(partitions)
    assert kept == ["b", "a", "americas/us", "", "c"]


@pytest.mark.parametrize(
    ("regex", "expected"),
    [
        ("2024/02", ["2024/02/01", "archive/2024/02/01", "2024/02/15"]),  # found anywhere: re.search
        ("^2024/02", ["2024/02/01", "2024/02/15"]),
        ("01$", ["2024/01/01", "2024/02/01", "2023/02/01", "archive/2024/02/01"]),
        ("^archive", ["archive/2024/02/01"]),
        ("2025", []),
        ("", None),  # an empty regex is no regex: everything
        (".*", PARTITIONS),
    ],
)
def test_partition_regex_uses_search(regex: str, expected: list[str] | None) -> None:
    config = CompactionConfig.from_config({STRATEGY: "UnBounded", REGEX: regex})
    assert config.filter_partitions(PARTITIONS) == (PARTITIONS if expected is None else expected)
    if regex:
        regex_config = CompactionConfig.from_config({STRATEGY: "PartitionRegex", REGEX: regex})
        assert regex_config.filter_partitions(PARTITIONS) == expected


def test_regex_applies_with_every_strategy() -> None:
    for strategy in (Strategy.LOG_FILE_SIZE_BASED, Strategy.LOG_FILE_NUM_BASED, Strategy.BOUNDED_IO):
        config = CompactionConfig(strategy=strategy, partition_regex="^2024/02/")
        assert config.filter_partitions(PARTITIONS) == ["2024/02/01", "2024/02/15"]


def test_filter_partitions_does_not_change_its_input() -> None:
    partitions = ["2024/01/01", "2024/01/03", "2024/01/02"]
    CompactionConfig(strategy=Strategy.DAY_BASED, day_based_target_partitions=2).filter_partitions(partitions)
    assert partitions == ["2024/01/01", "2024/01/03", "2024/01/02"]


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, ["2024/01/10"]),
        (2, ["2024/01/10", "2024/01/03"]),
        (4, ["2024/01/10", "2024/01/03", "2024/01/01", "2023/12/31"]),
        (10, ["2024/01/10", "2024/01/03", "2024/01/01", "2023/12/31"]),
    ],
)
def test_day_based_keeps_the_newest_n_partitions(n: int, expected: list[str]) -> None:
    config = CompactionConfig.from_config({STRATEGY: "DayBased", DAY_PARTITIONS: str(n)})
    assert config.filter_partitions(["2024/01/03", "2023/12/31", "2024/01/10", "2024/01/01"]) == expected


def test_day_based_default_keeps_ten_partitions() -> None:
    partitions = [f"2024/03/{d:02d}" for d in range(1, 16)]
    kept = CompactionConfig(strategy=Strategy.DAY_BASED).filter_partitions(partitions)
    assert kept == [f"2024/03/{d:02d}" for d in range(15, 5, -1)]


def test_day_based_orders_by_date_across_years_and_months() -> None:
    partitions = ["2023/12/31", "2024/02/01", "2024/01/31", "2022/06/15", "2024/01/01"]
    kept = CompactionConfig(strategy=Strategy.DAY_BASED, day_based_target_partitions=3).filter_partitions(
        partitions
    )
    assert kept == ["2024/02/01", "2024/01/31", "2024/01/01"]


def test_day_based_accepts_hive_style_partitions() -> None:
    partitions = ["year=2024/month=01/day=02", "year=2024/month=01/day=10", "year=2023/month=12/day=31"]
    config = CompactionConfig(strategy=Strategy.DAY_BASED, day_based_target_partitions=2)
    assert config.filter_partitions(partitions) == ["year=2024/month=01/day=10", "year=2024/month=01/day=02"]


def test_day_based_applies_the_regex_first() -> None:
    config = CompactionConfig(
        strategy=Strategy.DAY_BASED, day_based_target_partitions=1, partition_regex=r"^\d"
    )
    # "americas/us" is not a date, but the regex leaves it out before dates are read.
    assert config.filter_partitions(["2024/01/01", "americas/us", "2024/01/02"]) == ["2024/01/02"]


def test_day_based_with_no_partitions() -> None:
    assert CompactionConfig(strategy=Strategy.DAY_BASED).filter_partitions([]) == []


@pytest.mark.parametrize(
    "bad",
    [
        "americas/us",
        "",
        "2024-01-01",
        "2024/13/01",
        "2024/02/30",
        "dt=2024-01-01",
        "2024/01/01/extra",
        "2024/01",
    ],
)
def test_day_based_refuses_non_date_partitions(bad: str) -> None:
    config = CompactionConfig(strategy=Strategy.DAY_BASED)
    with pytest.raises(InvalidWriteConfig) as excinfo:
        config.filter_partitions(["2024/01/01", bad])
    message = str(excinfo.value)
    assert STRATEGY in message
    assert repr(bad) in message


# -- order_and_filter: BoundedIO -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "ios", "expected"),
    [
        (100, [40, 50, 30, 20], ["a", "b", "c"]),  # 100 -> 60 -> 10 -> -20: c crosses the bound, d is out
        (100, [60, 40, 10], ["a", "b"]),  # 100 -> 40 -> 0: the bound is used up exactly
        (100, [99, 1, 1], ["a", "b"]),
        (100, [99, 0, 0, 1, 5], ["a", "b", "c", "d"]),  # ops of no IO are taken while some is left
        (10, [500, 1], ["a"]),  # the first op crosses the bound on its own and is still taken
        (512000, [1, 2, 3], ["a", "b", "c"]),
        (1, [0, 0, 0], ["a", "b", "c"]),
        (100, [], []),
    ],
)
def test_bounded_io_takes_ops_in_order_until_the_target_is_used_up(
    target: int, ios: list[int], expected: list[str]
) -> None:
    ops = [make_op(chr(ord("a") + i), io=io) for i, io in enumerate(ios)]
    config = CompactionConfig(strategy=Strategy.BOUNDED_IO, target_io_mb=target)
    assert ids(config.order_and_filter(ops)) == expected


def test_bounded_io_keeps_listing_order() -> None:
    ops = [
        make_op("small", io=1, log_size=1, log_files=1),
        make_op("big", io=50, log_size=900, log_files=9),
        make_op("mid", io=5, log_size=50, log_files=5),
    ]
    assert ids(CompactionConfig(strategy=Strategy.BOUNDED_IO).order_and_filter(ops)) == [
        "small",
        "big",
        "mid",
    ]


def test_bounded_io_truncates_io_to_whole_mb_as_hudis_long_value() -> None:
    # 10 - 9 = 1 -> 1 - 0 = 1 -> 1 - 3 = -2: with float subtraction b would already be past the bound.
    ops = [make_op("a", io=9.9), make_op("b", io=0.5), make_op("c", io=3.0), make_op("d", io=1.0)]
    config = CompactionConfig(strategy=Strategy.BOUNDED_IO, target_io_mb=10)
    assert ids(config.order_and_filter(ops)) == ["a", "b", "c"]


def test_bounded_io_with_a_zero_target_plans_nothing_as_hudi_1x() -> None:
    # Hudi 1.x checks ``targetIORemaining > 0`` before taking an op (0.x took one first).
    ops = [make_op("a", io=10), make_op("b", io=10)]
    config = CompactionConfig.from_config({STRATEGY: "BoundedIO", TARGET_IO: "0"})
    assert ids(config.order_and_filter(ops)) == []


def test_custom_strategy_classes_are_refused() -> None:
    with pytest.raises(InvalidWriteConfig, match="custom compaction strategy"):
        Strategy.parse("com.acme.BoundedIOCompactionStrategy")
    assert (
        Strategy.parse("org.apache.hudi.io.compact.strategy.DayBasedCompactionStrategy") is Strategy.DAY_BASED
    )


# -- order_and_filter: LogFileSizeBased ----------------------------------------------------------------------


def test_log_file_size_based_filters_by_threshold_inclusive_and_sorts_descending() -> None:
    ops = [make_op("a", log_size=99), make_op("b", log_size=100), make_op("c", log_size=101)]
    config = CompactionConfig(strategy=Strategy.LOG_FILE_SIZE_BASED, log_file_size_threshold=100)
    assert ids(config.order_and_filter(ops)) == ["c", "b"]


def test_log_file_size_based_default_threshold_keeps_everything_largest_first() -> None:
    ops = [make_op("a", log_size=0), make_op("b", log_size=5 * MB), make_op("c", log_size=3)]
    assert ids(CompactionConfig().order_and_filter(ops)) == ["b", "c", "a"]


def test_log_file_size_based_sort_is_stable() -> None:
    ops = [
        make_op("a", log_size=10),
        make_op("b", log_size=30),
        make_op("c", log_size=10),
        make_op("d", log_size=30),
        make_op("e", log_size=20),
    ]
    assert ids(CompactionConfig().order_and_filter(ops)) == ["b", "d", "e", "a", "c"]


def test_log_file_size_based_compares_whole_sizes() -> None:
    # Hudi's comparator compares longValue()s: 10.2 and 10.7 tie and keep their order.
    ops = [make_op("a", log_size=10.2), make_op("b", log_size=10.7), make_op("c", log_size=11.0)]
    assert ids(CompactionConfig().order_and_filter(ops)) == ["c", "a", "b"]


def test_log_file_size_based_bounds_io_after_sorting() -> None:
    ops = [
        make_op("a", log_size=10, io=60),
        make_op("b", log_size=30, io=60),
        make_op("c", log_size=20, io=60),
    ]
    config = CompactionConfig(strategy=Strategy.LOG_FILE_SIZE_BASED, target_io_mb=100)
    # sorted b, c, a; 100 -> 40 -> -20: b and c are taken, a is not.
    assert ids(config.order_and_filter(ops)) == ["b", "c"]


def test_log_file_size_based_ignores_the_log_file_count() -> None:
    ops = [make_op("many", log_size=10, log_files=50), make_op("few", log_size=20, log_files=1)]
    config = CompactionConfig(strategy=Strategy.LOG_FILE_SIZE_BASED, log_file_num_threshold=10)
    assert ids(config.order_and_filter(ops)) == ["few", "many"]


def test_log_file_size_based_treats_a_missing_metric_as_zero() -> None:
    ops = [
        CompactionOperation(BASE_INSTANT, "bare", "2024/01/01", metrics={TOTAL_IO_MB: 1.0}),
        make_op("sized", log_size=5, io=1),
    ]
    assert ids(CompactionConfig(log_file_size_threshold=1).order_and_filter(ops)) == ["sized"]
    assert ids(CompactionConfig().order_and_filter(ops)) == ["sized", "bare"]


def test_order_and_filter_does_not_change_its_input() -> None:
    ops = [make_op("a", log_size=1), make_op("b", log_size=2), make_op("c", log_size=3)]
    before = list(ops)
    result = CompactionConfig().order_and_filter(ops)
    assert ids(result) == ["c", "b", "a"]
    assert ops == before


# -- order_and_filter: LogFileNumBased -----------------------------------------------------------------------


def test_log_file_num_based_filters_by_threshold_inclusive_and_sorts_descending() -> None:
    ops = [
        make_op("a", log_files=2),
        make_op("b", log_files=3),
        make_op("c", log_files=5),
        make_op("d", log_files=3),
        make_op("e", log_files=1),
    ]
    config = CompactionConfig(strategy=Strategy.LOG_FILE_NUM_BASED, log_file_num_threshold=3)
    assert ids(config.order_and_filter(ops)) == ["c", "b", "d"]


def test_log_file_num_based_ignores_log_sizes() -> None:
    ops = [make_op("big", log_size=900 * MB, log_files=1), make_op("many", log_size=1, log_files=4)]
    config = CompactionConfig(strategy=Strategy.LOG_FILE_NUM_BASED, log_file_size_threshold=10**12)
    assert ids(config.order_and_filter(ops)) == ["many", "big"]


def test_log_file_num_based_bounds_io_after_sorting() -> None:
    ops = [
        make_op("a", log_files=1, io=30),
        make_op("b", log_files=4, io=30),
        make_op("c", log_files=2, io=30),
        make_op("d", log_files=3, io=30),
    ]
    config = CompactionConfig(strategy=Strategy.LOG_FILE_NUM_BASED, target_io_mb=60)
    # sorted b, d, c, a; 60 -> 30 -> 0.
    assert ids(config.order_and_filter(ops)) == ["b", "d"]


# -- order_and_filter: DayBased ------------------------------------------------------------------------------


def test_day_based_orders_newest_partition_first_stably_then_bounds_io() -> None:
    ops = [
        make_op("a", partition="2024/01/01", io=40),
        make_op("b", partition="2024/01/03", io=40),
        make_op("c", partition="2024/01/02", io=40),
        make_op("d", partition="2024/01/03", io=40),
        make_op("e", partition="2023/12/31", io=40),
    ]
    unbounded = CompactionConfig(strategy=Strategy.DAY_BASED)
    assert ids(unbounded.order_and_filter(ops)) == ["b", "d", "c", "a", "e"]
    bounded = CompactionConfig(strategy=Strategy.DAY_BASED, target_io_mb=100)
    assert ids(bounded.order_and_filter(ops)) == ["b", "d", "c"]  # 100 -> 60 -> 20 -> -20


def test_day_based_orders_hive_style_partitions() -> None:
    ops = [
        make_op("old", partition="year=2023/month=12/day=31"),
        make_op("new", partition="year=2024/month=01/day=02"),
        make_op("mid", partition="year=2024/month=01/day=01"),
    ]
    assert ids(CompactionConfig(strategy=Strategy.DAY_BASED).order_and_filter(ops)) == ["new", "mid", "old"]


def test_day_based_ignores_log_metrics() -> None:
    ops = [
        make_op("a", partition="2024/01/01", log_size=10**9, log_files=100),
        make_op("b", partition="2024/01/02", log_size=0, log_files=0),
    ]
    config = CompactionConfig(
        strategy=Strategy.DAY_BASED, log_file_size_threshold=1, log_file_num_threshold=1
    )
    assert ids(config.order_and_filter(ops)) == ["b", "a"]


def test_day_based_refuses_operations_of_non_date_partitions() -> None:
    ops = [make_op("a", partition="2024/01/01"), make_op("b", partition="americas/us")]
    with pytest.raises(InvalidWriteConfig, match="americas/us"):
        CompactionConfig(strategy=Strategy.DAY_BASED).order_and_filter(ops)


# -- order_and_filter: UnBounded and PartitionRegex ----------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        CompactionConfig(strategy=Strategy.UNBOUNDED, target_io_mb=1, log_file_size_threshold=10**9),
        CompactionConfig(
            strategy=Strategy.PARTITION_REGEX,
            partition_regex="^nothing$",
            target_io_mb=1,
            log_file_size_threshold=10**9,
            log_file_num_threshold=10**9,
        ),
    ],
    ids=["UnBounded", "PartitionRegex"],
)
def test_unbounded_and_partition_regex_keep_every_operation_in_order(config: CompactionConfig) -> None:
    ops = [
        make_op("a", io=10**6, log_size=1, partition="not/a/date"),
        make_op("b", io=10**6, log_size=9, log_files=3),
        make_op("c", io=0),
    ]
    result = config.order_and_filter(ops)
    assert ids(result) == ["a", "b", "c"]
    assert result is not ops


# -- capture_metrics -----------------------------------------------------------------------------------------

METRIC_ORDER = [
    "TOTAL_LOG_FILES",
    "TOTAL_IO_MB",
    "TOTAL_IO_READ_MB",
    "TOTAL_LOG_FILES_SIZE",
    "TOTAL_IO_WRITE_MB",
]


def test_metric_names_are_hudis() -> None:
    assert [TOTAL_LOG_FILES, TOTAL_IO_MB, TOTAL_IO_READ_MB, TOTAL_LOG_FILES_SIZE, TOTAL_IO_WRITE_MB] == (
        METRIC_ORDER
    )


@pytest.mark.parametrize(
    ("base", "logs", "expected"),
    [
        # base 10 MB + logs 1 MB and 2 MB + 5 bytes: read (13 MB + 5) // MB = 13, write 10.
        (10 * MB, [MB, 2 * MB + 5], [2.0, 23.0, 13.0, float(3 * MB + 5), 10.0]),
        # sizes are floored to whole MB: (MB - 1 + 1) // MB = 1 read, (MB - 1) // MB = 0 write.
        (MB - 1, [1], [1.0, 1.0, 1.0, 1.0, 0.0]),
        (MB - 1, [0], [1.0, 0.0, 0.0, 0.0, 0.0]),
        # no logs at all
        (5 * MB, [], [0.0, 10.0, 5.0, 0.0, 5.0]),
        # a log of unknown size (-1) counts as a file but adds nothing
        (4 * MB, [-1, 2 * MB], [2.0, 10.0, 6.0, float(2 * MB), 4.0]),
        # large files: read (3072 + 1000.5) MB + 7 bytes -> 4072, write 3072
        (
            3 * 1024 * MB + 7,
            [700 * MB, 300 * MB + MB // 2],
            [2.0, 7144.0, 4072.0, float(1000 * MB + MB // 2), 3072.0],
        ),
    ],
)
def test_capture_metrics_with_a_base_file(base: int, logs: list[int], expected: list[float]) -> None:
    metrics = CompactionConfig().capture_metrics(make_slice(base, logs))
    assert list(metrics) == METRIC_ORDER
    assert list(metrics.values()) == expected
    assert all(type(v) is float for v in metrics.values())


def test_capture_metrics_without_a_base_file_writes_a_max_size_file() -> None:
    metrics = CompactionConfig().capture_metrics(make_slice(None, [3 * MB, MB // 2]))
    assert metrics == {
        TOTAL_LOG_FILES: 2.0,
        TOTAL_IO_MB: 123.0,  # read (3.5 MB) // MB = 3, write 120 MB (hoodie.parquet.max.file.size default)
        TOTAL_IO_READ_MB: 3.0,
        TOTAL_LOG_FILES_SIZE: float(3 * MB + MB // 2),
        TOTAL_IO_WRITE_MB: 120.0,
    }
    assert list(metrics) == METRIC_ORDER


@pytest.mark.parametrize(
    ("max_bytes", "write_mb"),
    [(64 * MB + 1, 64.0), (64 * MB - 1, 63.0), (MB - 1, 0.0), (1024 * MB, 1024.0)],
)
def test_capture_metrics_without_a_base_file_uses_the_configured_max_file_size(
    max_bytes: int, write_mb: float
) -> None:
    config = CompactionConfig.from_config({MAX_FILE_SIZE: str(max_bytes)})
    metrics = config.capture_metrics(make_slice(None, [2 * MB]))
    assert metrics[TOTAL_IO_WRITE_MB] == write_mb
    assert metrics[TOTAL_IO_READ_MB] == 2.0
    assert metrics[TOTAL_IO_MB] == 2.0 + write_mb


def test_capture_metrics_max_file_size_does_not_matter_with_a_base_file() -> None:
    config = CompactionConfig(max_file_bytes=999 * MB)
    assert config.capture_metrics(make_slice(7 * MB, [MB]))[TOTAL_IO_WRITE_MB] == 7.0


def test_capture_metrics_ignores_a_base_size_without_a_base_file() -> None:
    slice_ = FileSlice(
        FileGroupId("p", "f1-0"),
        BASE_INSTANT,
        None,
        50 * MB,
        (LogFile.parse(f".f1-0_{BASE_INSTANT}.log.1_0-1-0"),),
        (MB,),
    )
    assert list(CompactionConfig().capture_metrics(slice_).values()) == [1.0, 121.0, 1.0, float(MB), 120.0]


@pytest.mark.parametrize("strategy", list(Strategy))
def test_capture_metrics_is_the_same_for_every_strategy(strategy: Strategy) -> None:
    config = CompactionConfig(strategy=strategy, partition_regex=".")
    metrics = config.capture_metrics(make_slice(8 * MB, [MB, MB, MB]))
    assert list(metrics.items()) == [
        (TOTAL_LOG_FILES, 3.0),
        (TOTAL_IO_MB, 19.0),
        (TOTAL_IO_READ_MB, 11.0),
        (TOTAL_LOG_FILES_SIZE, float(3 * MB)),
        (TOTAL_IO_WRITE_MB, 8.0),
    ]


def test_captured_metrics_drive_log_file_size_based_planning() -> None:
    slices = {
        "small": make_slice(10 * MB, [MB], file_id="small"),
        "large": make_slice(10 * MB, [40 * MB, 20 * MB], file_id="large"),
        "logs-only": make_slice(None, [30 * MB], file_id="logs-only"),
        "tiny": make_slice(10 * MB, [1000], file_id="tiny"),
    }
    config = CompactionConfig(log_file_size_threshold=MB, target_io_mb=200)
    ops = [
        CompactionOperation(
            BASE_INSTANT,
            s.file_id,
            s.partition_path,
            s.base_file.file_name if s.base_file else None,
            tuple(lf.file_name for lf in s.log_files),
            config.capture_metrics(s),
        )
        for s in slices.values()
    ]
    # "tiny" is under the threshold; large (60 MB of logs, IO 80), then logs-only (30 MB, IO 150) crosses
    # the bound of 200 and is the last taken.
    assert ids(config.order_and_filter(ops)) == ["large", "logs-only"]
    assert ids(CompactionConfig(log_file_size_threshold=MB).order_and_filter(ops)) == [
        "large",
        "logs-only",
        "small",
    ]
