"""A small renderer of exactly the Helm features ``deploy/helm/hoodied`` uses, so that the chart can be
rendered and checked on a machine without ``helm`` (``helm template`` is a cross-check where it exists).

Supported, with Helm 3's semantics (Go's text/template and the sprig functions Helm adds):

- the chart: ``Chart.yaml`` (``.Chart.Name``, ``.Chart.Version``, ``.Chart.AppVersion``), ``values.yaml``
  with override values coalesced over it as ``helm -f`` does (maps merge key by key, anything else replaces,
  an override's ``null`` deletes the key), ``templates/*.yaml`` and ``templates/NOTES.txt`` rendered,
  ``templates/_*.tpl`` only defining named templates;
- built-in objects: ``.Values``, ``.Release.Name``, ``.Release.Namespace``, ``.Release.Service`` and
  ``.Files.Get "path"`` (a file of the chart, as it is; a missing file is an error here, Helm gives "");
- template syntax: text and ``{{ pipeline }}`` actions, ``{{-`` and ``-}}`` trimming the white space beside
  them, comments ``{{/* ... */}}``, ``if`` / ``else if`` / ``else`` / ``end``, ``with`` / ``end`` (no else),
  ``define "name"`` / ``end``;
- operands: ``.``, a field chain on the dot (``.Values.a.b``), ``$`` and a field chain on it, string
  literals in double quotes, whole numbers; pipelines ``x | f a | g`` (the value before ``|`` is the last
  argument of the function after it);
- functions: ``include``, ``required``, ``default``, ``quote``, ``toYaml``, ``indent``, ``nindent``,
  ``trunc``, ``trimSuffix``, ``contains``, ``replace``, ``printf`` (``%s``, ``%d``, ``%v``, ``%%``),
  ``sha256sum``, ``not``.

Anything else (another function or action, variables, parentheses, ``range``, raw strings) is an error, as
are a field of nothing (Go's "nil pointer evaluating") and a number Helm would print in exponent form: a
chart that starts using a feature must teach it here first. Printed values follow Go's fmt (nothing prints
as the empty string, as Helm prints ``<no value>``); ``toYaml`` output parses to what Helm's does (sorted
keys), though its quoting style may differ.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

#: Go's white space (text/template trims these beside ``{{-`` and ``-}}``).
SPACE = " \t\r\n"
#: How deep ``include`` may nest (Helm's own limit is 1000; the chart needs 2).
MAX_INCLUDE_DEPTH = 100
#: Numbers Helm holds as float64 and prints in Go's %v form, which switches to an exponent at 1e+06.
GO_EXPONENT_AT = 1_000_000


class HelmRenderError(Exception):
    """A chart this renderer cannot render, or one Helm itself would refuse to render."""


# -- the chart -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chart:
    """A chart read from its folder: its metadata, default values and parsed templates."""

    directory: Path
    metadata: Mapping[str, Any]
    values: Mapping[str, Any]
    #: Rendered templates (``templates/<name>``, not ``_*``), parsed.
    templates: Mapping[str, list[Node]]
    #: Named templates, from every file under ``templates/``.
    defines: Mapping[str, list[Node]]


def load_chart(directory: str | Path) -> Chart:
    directory = Path(directory)
    metadata = _yaml_mapping(directory / "Chart.yaml")
    for key in ("apiVersion", "name", "version"):
        if key not in metadata:
            raise HelmRenderError(f"{directory}/Chart.yaml: no {key}")
    if metadata["apiVersion"] != "v2":
        raise HelmRenderError(f"{directory}/Chart.yaml: apiVersion {metadata['apiVersion']!r} (only v2 here)")
    values = _yaml_mapping(directory / "values.yaml")
    templates: dict[str, list[Node]] = {}
    defines: dict[str, list[Node]] = {}
    for path in sorted((directory / "templates").iterdir()):
        if path.is_dir():
            raise HelmRenderError(f"{path}: folders under templates/ are not supported")
        name = f"templates/{path.name}"
        nodes, found = _parse(path.read_text(encoding="utf-8"), name)
        for define, body in found.items():
            if define in defines:
                raise HelmRenderError(f"{name}: template {define!r} is defined twice")
            defines[define] = body
        if path.name.startswith("_"):
            if any(not isinstance(n, _Text) or n.text.strip(SPACE) for n in nodes):
                raise HelmRenderError(f"{name}: a partial may hold only definitions and comments")
        elif path.suffix in (".yaml", ".yml") or path.name == "NOTES.txt":
            templates[name] = nodes
        else:
            raise HelmRenderError(f"{name}: not a template this renderer knows (*.yaml, _*.tpl, NOTES.txt)")
    return Chart(directory, metadata, values, templates, defines)


def _yaml_mapping(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(loaded, dict):
        raise HelmRenderError(f"{path}: not a mapping")
    return loaded


def coalesce(defaults: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` over ``defaults`` as Helm merges a values file over a chart's values."""
    out = copy.deepcopy(dict(defaults))
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = coalesce(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def render(
    directory: str | Path,
    values: Mapping[str, Any] | None = None,
    release: str = "hoodied",
    namespace: str = "default",
) -> dict[str, str]:
    """Template name -> the text ``helm template RELEASE DIRECTORY -f VALUES`` renders from it (NOTES.txt
    too, which ``helm install`` prints)."""
    chart = load_chart(directory)
    top = _Struct(
        "the top",
        {
            "Values": coalesce(chart.values, values or {}),
            "Release": _Struct(".Release", {"Name": release, "Namespace": namespace, "Service": "Helm"}),
            "Chart": _Struct(
                ".Chart",
                {
                    "Name": chart.metadata["name"],
                    "Version": str(chart.metadata["version"]),
                    "AppVersion": str(chart.metadata.get("appVersion", "")),
                },
            ),
            "Files": _Files(chart.directory),
        },
    )
    return {name: _Execution(chart, name).run(nodes, top) for name, nodes in chart.templates.items()}


def render_objects(
    directory: str | Path,
    values: Mapping[str, Any] | None = None,
    release: str = "hoodied",
    namespace: str = "default",
) -> list[dict[str, Any]]:
    """The Kubernetes objects of the rendered manifests (every template but NOTES.txt), in file order."""
    objects = []
    for name, text in render(directory, values, release, namespace).items():
        if name.endswith("NOTES.txt"):
            continue
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            raise HelmRenderError(f"{name}: the rendered text is not YAML: {e}\n{text}") from None
        for doc in documents:
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise HelmRenderError(f"{name}: a document that is not a mapping: {doc!r}")
            objects.append(doc)
    return objects


def value_references(directory: str | Path) -> set[tuple[str, ...]]:
    """Every ``.Values.a.b`` path (as ``("a", "b")``) the chart's templates and partials name."""
    chart = load_chart(directory)
    found: set[tuple[str, ...]] = set()
    for nodes in [*chart.templates.values(), *chart.defines.values()]:
        for operand in _operands(nodes):
            if operand.kind == "field" and operand.path[:1] == ("Values",) and len(operand.path) > 1:
                found.add(operand.path[1:])
    return found


# -- parsing -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Operand:
    #: field (a chain on the dot, or on ``$`` when ``on_root``), string, number or function (a name).
    kind: str
    path: tuple[str, ...] = ()
    on_root: bool = False
    value: Any = None


@dataclass(frozen=True)
class _Pipeline:
    commands: tuple[tuple[_Operand, ...], ...]
    where: str


@dataclass
class _Text:
    text: str


@dataclass
class _Output:
    pipeline: _Pipeline


@dataclass
class _If:
    branches: list[tuple[_Pipeline, list[Node]]]
    otherwise: list[Node] = field(default_factory=list)


@dataclass
class _With:
    pipeline: _Pipeline
    body: list[Node]


Node = _Text | _Output | _If | _With


@dataclass
class _Action:
    words: list[str]
    where: str


#: One word of an action: a string, a pipe, a variable or field chain, a number or a name.
_WORD = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<string>"(?:[^"\\\n]|\\.)*")
    | (?P<pipe>\|)
    | (?P<root>\$(?:\.[A-Za-z_]\w*)*)(?![\w$])
    | (?P<field>\.(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)?)(?![\w.])
    | (?P<number>-?\d+)(?![\w.])
    | (?P<name>[A-Za-z_]\w*)(?![\w.])
    """,
    re.VERBOSE,
)


def _lex(source: str, template: str) -> Iterator[_Text | _Action]:
    """The template's text pieces and actions, white space trimmed beside ``{{-`` and ``-}}``."""
    pos = 0
    trim_next = False
    while True:
        start = source.find("{{", pos)
        text = source[pos:] if start < 0 else source[pos:start]
        if trim_next:
            text = text.lstrip(SPACE)
        inner = start + 2
        if start >= 0 and source[inner : inner + 1] == "-" and source[inner + 1 : inner + 2] in tuple(SPACE):
            text = text.rstrip(SPACE)
            inner += 2
        yield _Text(text)
        if start < 0:
            return
        where = f"{template}:{source.count(chr(10), 0, start) + 1}"
        end = _action_end(source, inner, where)
        content = source[inner:end]
        trim_next = len(content) >= 2 and content[-1] == "-" and content[-2] in SPACE
        if trim_next:
            content = content[:-2]
        pos = end + 2
        stripped = content.strip(SPACE)
        if stripped.startswith("/*"):
            if not stripped.endswith("*/"):
                raise HelmRenderError(f"{where}: a comment must be the whole action")
            continue
        yield _Action(_words(stripped, where), where)


def _action_end(source: str, pos: int, where: str) -> int:
    """Where the ``}}`` closing the action that starts at ``pos`` is (strings and comments skipped)."""
    if source[pos:].lstrip(SPACE).startswith("/*"):
        close = source.find("*/", pos)
        if close < 0:
            raise HelmRenderError(f"{where}: unclosed comment")
        pos = close + 2
    in_string = False
    while pos < len(source):
        char = source[pos]
        if in_string:
            if char == "\\":
                pos += 1
            elif char == '"':
                in_string = False
            elif char == "\n":
                raise HelmRenderError(f"{where}: unterminated string")
        elif char == '"':
            in_string = True
        elif source.startswith("}}", pos):
            return pos
        pos += 1
    raise HelmRenderError(f"{where}: unclosed action")


def _words(content: str, where: str) -> list[str]:
    words = []
    pos = 0
    while pos < len(content):
        m = _WORD.match(content, pos)
        if m is None:
            raise HelmRenderError(f"{where}: unsupported syntax at {content[pos:]!r} in {{{{ {content} }}}}")
        if m.lastgroup != "space":
            words.append(m.group())
        pos = m.end()
    return words


def _operand(word: str, where: str) -> _Operand:
    if word.startswith('"'):
        return _Operand("string", value=_unquote(word, where))
    if word.startswith("$"):
        return _Operand("field", tuple(p for p in word[1:].split(".") if p), on_root=True)
    if word.startswith("."):
        return _Operand("field", tuple(p for p in word.split(".") if p))
    if word[0] in "-0123456789":
        return _Operand("number", value=int(word))
    if word not in FUNCTIONS:
        raise HelmRenderError(f"{where}: {word!r} is not a function this renderer knows")
    return _Operand("function", value=word)


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


def _unquote(word: str, where: str) -> str:
    def escape(m: re.Match[str]) -> str:
        if m.group(1) not in _ESCAPES:
            raise HelmRenderError(f"{where}: unsupported escape \\{m.group(1)} in {word}")
        return _ESCAPES[m.group(1)]

    return re.sub(r"\\(.)", escape, word[1:-1])


def _pipeline(words: list[str], where: str) -> _Pipeline:
    commands: list[list[str]] = [[]]
    for word in words:
        if word == "|":
            commands.append([])
        else:
            commands[-1].append(word)
    if any(not c for c in commands):
        raise HelmRenderError(f"{where}: an empty command in {' '.join(words)!r}")
    parsed = tuple(tuple(_operand(w, where) for w in c) for c in commands)
    for i, command in enumerate(parsed):
        head = command[0]
        if head.kind in ("string", "number") and (len(command) > 1 or i > 0):
            raise HelmRenderError(f"{where}: {head.value!r} is not a function")
        if head.kind != "function" and any(a.kind == "function" for a in command[1:]):
            raise HelmRenderError(f"{where}: a function as an argument needs parentheses (not supported)")
    return _Pipeline(parsed, where)


#: Go's actions this renderer does not implement (its error names them).
_UNSUPPORTED_ACTIONS = frozenset({"range", "template", "block", "break", "continue"})


def _parse(source: str, template: str) -> tuple[list[Node], dict[str, list[Node]]]:
    """A template's nodes, and the named templates it defines."""
    items = list(_lex(source, template))
    defines: dict[str, list[Node]] = {}

    def block(i: int, top: bool) -> tuple[list[Node], int, _Action | None]:
        """Nodes up to an ``else`` or ``end`` (returned with the index after it), or the end at the top."""
        nodes: list[Node] = []
        while i < len(items):
            item = items[i]
            i += 1
            if isinstance(item, _Text):
                if item.text:
                    nodes.append(item)
                continue
            head, rest = item.words[0] if item.words else "", item.words[1:]
            if head in ("else", "end"):
                if top:
                    raise HelmRenderError(f"{item.where}: unexpected {head}")
                return nodes, i, item
            if head == "if":
                node, i = if_chain(rest, item.where, i)
                nodes.append(node)
            elif head == "with":
                body, i, closing = block(i, False)
                if closing is None or closing.words != ["end"]:
                    raise HelmRenderError(f"{item.where}: with needs a plain end (no else here)")
                nodes.append(_With(_pipeline(rest, item.where), body))
            elif head == "define":
                if not top or len(rest) != 1 or not rest[0].startswith('"'):
                    raise HelmRenderError(f'{item.where}: define "name" only at a template\'s top level')
                body, i, closing = block(i, False)
                if closing is None or closing.words != ["end"]:
                    raise HelmRenderError(f"{item.where}: define needs a plain end")
                name = _unquote(rest[0], item.where)
                if name in defines:
                    raise HelmRenderError(f"{item.where}: template {name!r} is defined twice")
                defines[name] = body
            elif head in _UNSUPPORTED_ACTIONS:
                raise HelmRenderError(f"{item.where}: the action {head!r} is not supported")
            elif not item.words:
                raise HelmRenderError(f"{item.where}: an empty action")
            else:
                nodes.append(_Output(_pipeline(item.words, item.where)))
        if not top:
            raise HelmRenderError(f"{template}: a block has no end")
        return nodes, i, None

    def if_chain(condition: list[str], where: str, i: int) -> tuple[_If, int]:
        node = _If([])
        while True:
            body, i, closing = block(i, False)
            node.branches.append((_pipeline(condition, where), body))
            assert closing is not None
            if closing.words == ["end"]:
                return node, i
            if closing.words == ["else"]:
                node.otherwise, i, closing = block(i, False)
                if closing is None or closing.words != ["end"]:
                    raise HelmRenderError(f"{closing.where if closing else where}: else after else")
                return node, i
            if closing.words[:2] == ["else", "if"] and len(closing.words) > 2:
                condition, where = closing.words[2:], closing.where
                continue
            raise HelmRenderError(f"{closing.where}: unsupported {' '.join(closing.words)!r}")

    nodes, _, _ = block(0, True)
    return nodes, defines


def _operands(nodes: list[Node]) -> Iterator[_Operand]:
    for node in nodes:
        pipelines: list[_Pipeline] = []
        children: list[list[Node]] = []
        if isinstance(node, _Output):
            pipelines.append(node.pipeline)
        elif isinstance(node, _If):
            pipelines.extend(p for p, _ in node.branches)
            children.extend(b for _, b in node.branches)
            children.append(node.otherwise)
        elif isinstance(node, _With):
            pipelines.append(node.pipeline)
            children.append(node.body)
        for pipeline in pipelines:
            for command in pipeline.commands:
                yield from command
        for child in children:
            yield from _operands(child)


# -- values --------------------------------------------------------------------------------------------------


class _Struct(dict[str, Any]):
    """A Go struct of Helm's (``.Release``, ``.Chart``): a field it lacks is an error, not nothing."""

    def __init__(self, name: str, fields: Mapping[str, Any]) -> None:
        super().__init__(fields)
        self.name = name


@dataclass(frozen=True)
class _Files:
    directory: Path

    def get(self, path: str) -> str:
        target = (self.directory / path).resolve()
        if self.directory.resolve() not in target.parents or not target.is_file():
            raise HelmRenderError(f".Files.Get {path!r}: no such file in the chart")
        return target.read_text(encoding="utf-8")


def _truth(value: Any) -> bool:
    """Go's truth (and sprig's "not empty"): nothing, false, 0 and empty strings and collections are false."""
    if isinstance(value, _Struct | _Files):
        return True
    return bool(value)


def _go_print(value: Any, where: str) -> str:
    """``value`` as ``{{ value }}`` (Go's %v) prints it in Helm."""
    if value is None:
        return ""  # Go prints <no value>, which Helm replaces by nothing
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        if abs(value) >= GO_EXPONENT_AT or (isinstance(value, float) and value and abs(value) < 1e-4):
            raise HelmRenderError(f"{where}: Helm prints {value!r} in exponent form (use toYaml or a string)")
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    raise HelmRenderError(f"{where}: printing a {type(value).__name__} (Go would print its %v form)")


def _go_quote(text: str) -> str:
    """Go's strconv.Quote (sprig's ``quote``)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif char in "\a\b\f\n\r\t\v":
            out.append("\\" + "abfnrtv"["\a\b\f\n\r\t\v".index(char)])
        elif char.isprintable():
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _to_yaml(value: Any) -> str:
    """Helm's ``toYaml``: the value as YAML (keys sorted, as Go's JSON step sorts them), no final newline."""
    text = yaml.safe_dump(value, sort_keys=True, default_flow_style=False, allow_unicode=True, width=1 << 30)
    return text.removesuffix("\n...\n").removesuffix("\n")


# -- functions -----------------------------------------------------------------------------------------------


def _expect(name: str, args: tuple[Any, ...], *types: type | tuple[type, ...]) -> None:
    if len(args) != len(types):
        raise HelmRenderError(f"{name}: expected {len(types)} arguments, got {len(args)}")
    for i, (arg, kind) in enumerate(zip(args, types, strict=True)):
        if not isinstance(arg, kind) or (kind is int and isinstance(arg, bool)):
            raise HelmRenderError(f"{name}: argument {i + 1} is {arg!r}, not {kind}")


def _default(*args: Any) -> Any:
    if len(args) != 2:
        raise HelmRenderError(f"default: expected a default and a value, got {len(args)} arguments")
    return args[1] if _truth(args[1]) else args[0]


def _required(*args: Any) -> Any:
    _expect("required", args[:1], str)
    if len(args) != 2:
        raise HelmRenderError("required: expected a message and a value")
    if args[1] is None or args[1] == "":
        raise HelmRenderError(f"required: {args[0]}")
    return args[1]


def _quote(*args: Any) -> str:
    return " ".join(_go_quote(_go_print(a, "quote")) for a in args if a is not None)


def _indent(*args: Any) -> str:
    _expect("indent", args, int, str)
    pad = " " * int(args[0])
    return pad + str(args[1]).replace("\n", "\n" + pad)


def _trunc(*args: Any) -> str:
    _expect("trunc", args, int, str)
    count: int = args[0]
    text: str = args[1]
    if count < 0:
        return text[len(text) + count :] if len(text) + count > 0 else text
    return text[:count]


def _printf(*args: Any) -> str:
    if not args or not isinstance(args[0], str):
        raise HelmRenderError("printf: expected a format")
    rest = list(args[1:])

    def verb(m: re.Match[str]) -> str:
        if m.group(1) == "%":
            return "%"
        if not rest:
            raise HelmRenderError(f"printf {args[0]!r}: too few arguments")
        value = rest.pop(0)
        if m.group(1) == "s" and not isinstance(value, str):
            raise HelmRenderError(f"printf {args[0]!r}: %s of {value!r}")
        if m.group(1) == "d" and (not isinstance(value, int) or isinstance(value, bool)):
            raise HelmRenderError(f"printf {args[0]!r}: %d of {value!r}")
        return _go_print(value, "printf")

    out = re.sub(r"%(.)", lambda m: verb(m) if m.group(1) in "sdv%" else _bad_verb(args[0]), args[0])
    if rest:
        raise HelmRenderError(f"printf {args[0]!r}: too many arguments")
    return out


def _bad_verb(fmt: str) -> str:
    raise HelmRenderError(f"printf {fmt!r}: only %s, %d, %v and %% are supported")


def _to_yaml_function(*args: Any) -> str:
    _expect("toYaml", args, object)
    return _to_yaml(args[0])


def _not(*args: Any) -> bool:
    _expect("not", args, object)
    return not _truth(args[0])


def _string_function(name: str, arity: int, apply: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        _expect(name, args, *([str] * arity))
        return apply(*args)

    return call


#: sprig's and Helm's functions this renderer has (``include`` is the execution's own).
FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "include": lambda *args: None,  # replaced by _Execution
    "required": _required,
    "default": _default,
    "quote": _quote,
    "toYaml": _to_yaml_function,
    "indent": _indent,
    "nindent": lambda *args: "\n" + _indent(*args),
    "trunc": _trunc,
    "trimSuffix": _string_function("trimSuffix", 2, lambda suffix, s: s.removesuffix(suffix)),
    "contains": _string_function("contains", 2, lambda part, s: part in s),
    "replace": _string_function("replace", 3, lambda old, new, s: s.replace(old, new)),
    "printf": _printf,
    "sha256sum": _string_function("sha256sum", 1, lambda s: hashlib.sha256(s.encode()).hexdigest()),
    "not": _not,
}


# -- execution -----------------------------------------------------------------------------------------------


class _Execution:
    """One template's rendering: its nodes run against a dot, ``$`` being the dot it started with."""

    def __init__(self, chart: Chart, template: str) -> None:
        self.chart = chart
        self.template = template
        self.depth = 0

    def run(self, nodes: list[Node], dot: Any, root: Any = None) -> str:
        root = dot if root is None else root
        out: list[str] = []
        for node in nodes:
            if isinstance(node, _Text):
                out.append(node.text)
            elif isinstance(node, _Output):
                out.append(_go_print(self.pipeline(node.pipeline, dot, root), node.pipeline.where))
            elif isinstance(node, _If):
                for condition, body in node.branches:
                    if _truth(self.pipeline(condition, dot, root)):
                        out.append(self.run(body, dot, root))
                        break
                else:
                    out.append(self.run(node.otherwise, dot, root))
            else:
                value = self.pipeline(node.pipeline, dot, root)
                if _truth(value):
                    out.append(self.run(node.body, value, root))
        return "".join(out)

    def include(self, *args: Any) -> str:
        _expect("include", args, str, object)
        name, data = args
        if name not in self.chart.defines:
            raise HelmRenderError(f"include: no template {name!r}")
        if self.depth >= MAX_INCLUDE_DEPTH:
            raise HelmRenderError(f"include {name!r}: nested too deep")
        self.depth += 1
        try:
            return self.run(self.chart.defines[name], data, data)
        finally:
            self.depth -= 1

    def pipeline(self, pipeline: _Pipeline, dot: Any, root: Any) -> Any:
        value: Any = None
        for i, command in enumerate(pipeline.commands):
            piped = (value,) if i > 0 else ()
            head, rest = command[0], command[1:]
            args = tuple(self.operand(a, dot, root, pipeline.where) for a in rest) + piped
            try:
                if head.kind == "function":
                    call = self.include if head.value == "include" else FUNCTIONS[head.value]
                    value = call(*args)
                elif head.kind == "field" and head.path[-1:] == ("Get",) and (args or piped):
                    files = self.field(head.path[:-1], dot, root, head.on_root, pipeline.where)
                    if not isinstance(files, _Files):
                        raise HelmRenderError("only .Files.Get is a method here")
                    _expect(".Files.Get", args, str)
                    value = files.get(args[0])
                elif args:
                    raise HelmRenderError(f"{'.'.join(head.path) or '.'} is not a function")
                else:
                    value = self.operand(head, dot, root, pipeline.where)
            except HelmRenderError as e:
                if str(e).startswith(pipeline.where):
                    raise
                raise HelmRenderError(f"{pipeline.where}: {e}") from None
        return value

    def operand(self, operand: _Operand, dot: Any, root: Any, where: str) -> Any:
        if operand.kind == "field":
            return self.field(operand.path, dot, root, operand.on_root, where)
        if operand.kind == "function":
            raise HelmRenderError(f"{where}: {operand.value} as an argument needs parentheses")
        return operand.value

    def field(self, path: tuple[str, ...], dot: Any, root: Any, on_root: bool, where: str) -> Any:
        value = root if on_root else dot
        walked = "$" if on_root else ""
        for name in path:
            if isinstance(value, _Struct) and name not in value:
                raise HelmRenderError(f"{where}: {value.name} has no field {name}")
            if isinstance(value, _Files):
                raise HelmRenderError(f"{where}: .Files.{name} is not supported (only .Files.Get)")
            if value is None:
                raise HelmRenderError(f"{where}: nil pointer evaluating {walked or '.'}.{name}")
            if not isinstance(value, Mapping):
                raise HelmRenderError(
                    f"{where}: {walked or '.'} is a {type(value).__name__}, it has no {name}"
                )
            value = value.get(name)
            walked += f".{name}"
        return value
