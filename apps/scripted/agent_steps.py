"""Scripted browser-use agent steps: read the agent's prompt, resolve targets, build its output.

browser-use (0.13.x) sends each step as [system prompt, one user "state" message, optional
context user messages]. The state message carries ``<browser_state>`` with the interactive-element
listing (``[12]<button id=add />`` followed by the element's text on deeper-indented lines) and
``<step_info>StepN maximum:M</step_info>`` where N is 1 for the first step. A scripted step names
elements by what a person sees (``{"click": {"target": "Add item"}}``); this module turns that into
the index-based actions of the AgentOutput schema the request carries.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from webgen_agent.apps.scripted.views import AgentStep


class AgentStepError(ValueError):
    """The scripted step cannot be turned into valid output; the message is for the scenario author."""


_STEP_INFO = re.compile(r"<step_info>\s*Step\s*(\d+)\s+maximum:\s*(\d+)")
_BROWSER_STATE = re.compile(r"<browser_state>(.*?)</browser_state>", re.DOTALL)
_ELEMENT_LINE = re.compile(
    r"^(?P<indent>\t*)(?:\|SHADOW\((?:open|closed)\)\|)?\*?(?:\|scroll element)?"
    r"\[(?P<index>\d+)\]<(?P<tag>[A-Za-z][\w:-]*)(?P<attrs>.*?)\s*/>"
)
_STRUCTURE_LINE = re.compile(r"^\t*(?:\|scroll element\||\|IFRAME\||\|FRAME\||Open Shadow|Closed Shadow|Shadow End)")
_SCHEMA_IN_PROMPT = re.compile(r"<json_schema>\s*(.*?)\s*</json_schema>", re.DOTALL)

# Attribute names browser-use prints as ``key=value`` (values are unquoted and may hold spaces, so
# only these names start a new attribute).
_KNOWN_ATTRIBUTES = [
    *("title", "type", "checked", "id", "name", "role", "value", "placeholder", "alt", "href", "level"),
    *("aria-label", "aria-expanded", "aria-checked", "aria-placeholder", "aria-autocomplete"),
    *("aria-valuemin", "aria-valuemax", "aria-valuenow", "valuetext", "expanded", "pressed", "focused"),
    *("pattern", "min", "max", "minlength", "maxlength", "step", "accept", "multiple", "inputmode"),
    *("autocomplete", "list", "data-state", "data-mask", "data-inputmask", "data-datepicker"),
    *("data-date-format", "format", "expected_format", "contenteditable", "compound_components"),
    *("selected", "disabled", "required", "invalid"),
]
_ATTRIBUTE_START = re.compile(r"(?:^|\s)(" + "|".join(re.escape(a) for a in _KNOWN_ATTRIBUTES) + r")=")
# Fields a target may name, in the order they are tried.
_TARGET_FIELDS = (
    "text",
    "placeholder",
    "aria-label",
    "name",
    "id",
    "value",
    "title",
    "alt",
    "aria-placeholder",
)
_TEXT_ENTRY_TAGS = {"input", "textarea", "select"}


@dataclass(frozen=True)
class PageElement:
    """One interactive element of the listing."""

    index: int
    tag: str
    attributes: dict[str, str]
    text: str

    def label(self) -> str:
        """Short description used in error messages."""
        name = self.text or next((self.attributes[k] for k in _TARGET_FIELDS[1:] if k in self.attributes), "")
        return f"[{self.index}]<{self.tag}> {name[:40]}".rstrip()

    def names(self) -> list[str]:
        values = [self.text] + [self.attributes.get(key, "") for key in _TARGET_FIELDS[1:]]
        return [_normalize(v) for v in values if v.strip()]


@dataclass(frozen=True)
class AgentPrompt:
    """What the server needs from one browser-use step request."""

    step: int | None = None  # 0-based agent step
    max_steps: int | None = None
    page_text: str = ""
    elements: list[PageElement] = field(default_factory=list)


def _normalize(text: str) -> str:
    return " ".join(text.split()).casefold()


def parse_agent_prompt(user_texts: list[str]) -> AgentPrompt | None:
    """Find the browser-use state message among the user messages; None when there is none."""
    for text in reversed(user_texts):
        state = _BROWSER_STATE.search(text)
        step_info = _STEP_INFO.search(text)
        if state is None and step_info is None:
            continue
        page_text = state.group(1) if state else ""
        return AgentPrompt(
            step=int(step_info.group(1)) - 1 if step_info else None,
            max_steps=int(step_info.group(2)) if step_info else None,
            page_text=page_text,
            elements=parse_elements(page_text),
        )
    return None


def parse_attributes(raw: str) -> dict[str, str]:
    """Split browser-use's ``key=value key2=value with spaces`` attribute text."""
    starts = list(_ATTRIBUTE_START.finditer(raw))
    attributes: dict[str, str] = {}
    for position, match in enumerate(starts):
        end = starts[position + 1].start() if position + 1 < len(starts) else len(raw)
        value = raw[match.end() : end].strip()
        attributes[match.group(1)] = "" if value == "''" else value
    return attributes


def parse_elements(listing: str) -> list[PageElement]:
    """Interactive elements of a listing, each with the text of the lines nested under it."""
    lines = listing.splitlines()
    elements: list[PageElement] = []
    for position, line in enumerate(lines):
        match = _ELEMENT_LINE.match(line)
        if match is None:
            continue
        depth = len(match.group("indent"))
        texts: list[str] = []
        for following in lines[position + 1 :]:
            following_depth = len(following) - len(following.lstrip("\t"))
            if not following.strip():
                continue
            if following_depth <= depth:
                break
            if _ELEMENT_LINE.match(following) or _STRUCTURE_LINE.match(following):
                continue
            texts.append(following.strip())
        elements.append(
            PageElement(
                index=int(match.group("index")),
                tag=match.group("tag").lower(),
                attributes=parse_attributes(match.group("attrs").strip()),
                text=" ".join(texts),
            )
        )
    return elements


def resolve_target(target: str, elements: list[PageElement], *, for_text_entry: bool = False) -> int:
    """Index of the element a target names.

    For typing, text-entry elements come first; then exact names beat substrings; then the earlier
    element in the listing wins.
    """
    wanted = _normalize(target)
    if not wanted:
        raise AgentStepError("empty target")

    def rank(element: PageElement) -> tuple[int, int] | None:
        names = element.names()
        if wanted in names:
            quality = 0
        elif any(wanted in name for name in names):
            quality = 1
        else:
            return None
        editable = element.tag in _TEXT_ENTRY_TAGS or element.attributes.get("contenteditable") == "true"
        return (0 if (editable or not for_text_entry) else 1, quality)

    ranked = [(r, position, e) for position, e in enumerate(elements) if (r := rank(e)) is not None]
    if not ranked:
        listed = "; ".join(e.label() for e in elements[:25]) or "no interactive elements"
        raise AgentStepError(f"target {target!r} matches no interactive element. Elements: {listed}")
    return min(ranked, key=lambda item: (item[0], item[1]))[2].index


# ---- high-level actions -> browser-use actions ----


def _needs_index(params: dict[str, Any], prompt: AgentPrompt, *, for_text_entry: bool = False) -> dict[str, Any]:
    """Replace ``target`` by the element index it names."""
    params = dict(params)
    target = params.pop("target", None)
    if target is not None:
        params["index"] = resolve_target(str(target), prompt.elements, for_text_entry=for_text_entry)
    return params


def concrete_action(name: str, params: Any, prompt: AgentPrompt) -> tuple[str, dict[str, Any]]:
    """One scripted action as (browser-use action name, params before schema defaults)."""
    if name == "scroll":
        if isinstance(params, str):
            params = {"direction": params}
        params = dict(params or {})
        direction = params.pop("direction", None)
        if direction is not None:
            if direction not in ("down", "up"):
                raise AgentStepError(f"scroll direction must be 'down' or 'up', got {direction!r}")
            params["down"] = direction == "down"
        return "scroll", _needs_index(params, prompt)
    if isinstance(params, str):
        raise AgentStepError(f"action {name!r} needs an object of params, got the string {params!r}")
    params = dict(params or {})
    if name in ("input", "type"):
        return "input", _needs_index(params, prompt, for_text_entry=True)
    if name == "wait" and "seconds" in params:
        params["seconds"] = round(float(params["seconds"]))
    return name, _needs_index(params, prompt)


# ---- the AgentOutput schema the request carries ----


@dataclass(frozen=True)
class OutputSchema:
    """The agent-output JSON schema and where the request carried it."""

    schema: dict[str, Any] | None
    carrier: str  # "response_format" | "tool" | "system_prompt" | "none"
    tool_name: str | None = None


def _has_action_list(schema: Any) -> bool:
    return isinstance(schema, dict) and "action" in (schema.get("properties") or {})


def find_output_schema(request: dict[str, Any], system_texts: list[str]) -> OutputSchema:
    """Look for the AgentOutput schema in response_format, then tools, then the system prompt."""
    response_format = request.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if _has_action_list(schema):
            return OutputSchema(schema, "response_format")
    for tool in request.get("tools") or []:
        function = tool.get("function") or {}
        if _has_action_list(function.get("parameters")):
            return OutputSchema(function["parameters"], "tool", tool_name=function.get("name"))
    for text in system_texts:
        for found in _SCHEMA_IN_PROMPT.finditer(text):
            schema = _parse_schema_text(found.group(1))
            if isinstance(schema, dict) and not _has_action_list(schema):
                schema = schema.get("schema")  # browser-use embeds the whole response_format entry
            if _has_action_list(schema):
                return OutputSchema(schema, "system_prompt")
    return OutputSchema(None, "none")


def _parse_schema_text(text: str) -> Any:
    """browser-use writes the schema as a Python dict repr, others as JSON; accept both."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _deref(node: Any, root: dict[str, Any]) -> Any:
    if isinstance(node, dict) and isinstance(node.get("$ref"), str):
        name = node["$ref"].rsplit("/", 1)[-1]
        return _deref((root.get("$defs") or root.get("definitions") or {}).get(name, {}), root)
    return node


def offered_actions(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """action name -> its params schema, from the ``action`` array of an AgentOutput schema."""
    items = _deref(schema["properties"]["action"].get("items") or {}, schema)
    variants = items.get("anyOf") or items.get("oneOf") or [items]
    offered: dict[str, dict[str, Any]] = {}
    for variant in variants:
        variant = _deref(variant, schema)
        for name, params_schema in (variant.get("properties") or {}).items():
            params_schema = _deref(params_schema, schema)
            # Optional params objects appear as anyOf [object, null] in non-optimized schemas.
            for option in params_schema.get("anyOf") or []:
                option = _deref(option, schema)
                if option.get("type") == "object":
                    params_schema = option
                    break
            offered[name] = params_schema
    return offered


_MISSING = object()


def fit_params(name: str, params: dict[str, Any], params_schema: dict[str, Any]) -> dict[str, Any]:
    """Params completed with schema defaults, in schema order; unknown or missing ones are errors."""
    properties: dict[str, Any] = params_schema.get("properties") or {}
    unknown = sorted(set(params) - set(properties))
    if unknown:
        raise AgentStepError(f"action {name!r} has no params {unknown}; it takes {sorted(properties)}")
    required = set(params_schema.get("required") or [])
    fitted: dict[str, Any] = {}
    for key, prop in properties.items():
        value = params.get(key, _MISSING)
        if value is _MISSING:
            prop = prop if isinstance(prop, dict) else {}
            if "default" in prop:
                value = prop["default"]
            elif key in required:
                raise AgentStepError(f"action {name!r} needs param {key!r}")
            else:
                continue
        fitted[key] = value
    return fitted


# browser-use's usual parameter defaults, used only when a request carries no schema at all.
_FALLBACK_DEFAULTS: dict[str, dict[str, Any]] = {
    "input": {"clear": True},
    "scroll": {"down": True, "pages": 1.0},
    "wait": {"seconds": 3},
    "navigate": {"new_tab": False},
    "done": {"success": True},
    "go_back": {},
}


def build_agent_output(step: AgentStep, prompt: AgentPrompt, schema: OutputSchema) -> dict[str, Any]:
    """The AgentOutput object for one scripted step, valid for the schema the request carries."""
    offered = offered_actions(schema.schema) if schema.schema is not None else None
    actions: list[dict[str, Any]] = []
    for scripted in step.actions:
        ((raw_name, raw_params),) = scripted.items()
        name, params = concrete_action(raw_name, raw_params, prompt)
        if offered is None:
            actions.append({name: {**_FALLBACK_DEFAULTS.get(name, {}), **params}})
            continue
        if name not in offered:
            raise AgentStepError(
                f"action {name!r} is not offered by this request's schema (offered: {sorted(offered)})"
            )
        actions.append({name: fit_params(name, params, offered[name])})

    summary = ", ".join(next(iter(a)) for a in actions)
    brain: dict[str, Any] = {
        "thinking": step.thinking if step.thinking is not None else f"Scripted step: {summary}.",
        "evaluation_previous_goal": step.evaluation_previous_goal
        if step.evaluation_previous_goal is not None
        else "Scripted step; previous result not evaluated.",
        "memory": step.memory if step.memory is not None else "",
        "next_goal": step.next_goal if step.next_goal is not None else f"Run: {summary}.",
    }
    if schema.schema is None:
        return {**brain, "action": actions}
    output: dict[str, Any] = {}
    for key, prop in (schema.schema.get("properties") or {}).items():
        if key == "action":
            output[key] = actions
        elif key in brain:
            output[key] = brain[key]
        else:
            output[key] = prop.get("default") if isinstance(prop, dict) else None
    return output
