"""The scripted OpenAI-compatible model server: stands in for the LLM in tests and the offline demo.

Real clients (openai SDK, langchain-openai, browser-use's ChatOpenAI) talk to it over HTTP exactly as
to vLLM or OpenAI: ``POST /v1/chat/completions`` (plain or streamed), ``GET /v1/models``,
``GET /health``. Which answer a request gets is decided by the scenario's rules (see
docs/scripted-server.md); ``ScriptedServer`` runs it on a background thread for tests,
``serve`` in the foreground for the CLI.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from webgen_agent.apps.scripted.agent_steps import AgentStepError
from webgen_agent.apps.scripted.engine import (
    INVALID_BODY,
    MALFORMED_CONTENT,
    FolderTokenizer,
    Reply,
    RequestFacts,
    RuleBook,
    StandInTokenizer,
    build_completion,
    build_reply,
    request_facts,
    stream_events,
)
from webgen_agent.apps.scripted.views import ErrorBody, ErrorDetail, Fault, RequestRecord, Scenario, Usage

logger = logging.getLogger(__name__)


class DroppedConnection(Exception):
    """Raised after half an answer, so that uvicorn closes the connection: a scripted dropped connection."""


class _DroppedAnswer(Response):
    """Sends the headers and the first bytes of a chat completion, then drops the connection."""

    def __init__(self) -> None:
        super().__init__(status_code=200)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"4096")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-dropped", "choi', "more_body": True})
        raise DroppedConnection("scripted dropped connection")


class _QuietDrops(logging.Filter):
    """uvicorn logs an app error with its traceback; a scripted drop is not one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], DroppedConnection))


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


def _error(status: int, message: str, code: str, *, headers: dict[str, str] | None = None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    body = ErrorBody(error=ErrorDetail(message=message, type=kind, code=code))
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def no_rule_message(scenario: Scenario, facts: RequestFacts) -> str:
    """Says which request found no rule, so the scenario author can add one."""
    where = "agent step" if facts.agent is not None else "turn"
    return (
        f"scripted scenario {scenario.name!r} has no rule for model {facts.model!r} {where} {facts.turn}"
        f" (schema={facts.schema_name!r}); last user message begins: {facts.last_user_text[:200]!r}"
    )


class ScriptedModel:
    """The request handlers over one scenario; keeps the request log."""

    def __init__(self, scenario: Scenario) -> None:
        # Scenarios built in code (not Scenario.load) read their content files relative to the cwd.
        self.scenario = scenario.with_files_loaded(Path.cwd())
        self.rules = RuleBook(self.scenario)
        tokenizer = self.scenario.tokenizer
        self.tokenizer = FolderTokenizer(tokenizer) if isinstance(tokenizer, str) else StandInTokenizer()
        self.stopping = threading.Event()
        self._log: list[RequestRecord] = []
        self._log_lock = threading.Lock()

    async def _delay(self, request: Request, seconds: float) -> bool:
        """Sleep without blocking other requests; False when the client left or the server stops.

        Waiting in slices lets a stopping server or a client that gave up (timeout) end the wait,
        instead of uvicorn cancelling the handler with an error at shutdown.
        """
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while (left := end - loop.time()) > 0:
            await asyncio.sleep(min(left, 0.05))
            if self.stopping.is_set() or await request.is_disconnected():
                return False
        return True

    @property
    def requests(self) -> list[RequestRecord]:
        with self._log_lock:
            return list(self._log)

    def _record(
        self, facts: RequestFacts | None, rule_index: int | None, status: int, usage: Usage | None = None
    ) -> None:
        record = RequestRecord(
            model=facts.model if facts else "",
            turn=facts.turn if facts else None,
            agent_step=facts.agent is not None if facts else False,
            rule_index=rule_index,
            status=status,
            last_user_text=facts.last_user_text if facts else "",
            images=facts.image_count if facts else 0,
            image_digests=list(facts.images) if facts else [],
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )
        with self._log_lock:
            self._log.append(record)

    def app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/models", self.models, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
        ]
        if self.scenario.tokenizer is not False:  # at the root, as vLLM serves them
            routes += [
                Route("/tokenize", self.tokenize, methods=["POST"]),
                Route("/detokenize", self.detokenize, methods=["POST"]),
            ]
        return Starlette(routes=routes)

    async def tokenize(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
            prompt, special = body["prompt"], body.get("add_special_tokens", True)
        except (ValueError, KeyError, TypeError, AttributeError):
            return _error(400, "a JSON body with a prompt string is required", "invalid_request_error")
        if not isinstance(prompt, str):
            return _error(400, "prompt must be a string", "invalid_request_error")
        ids = self.tokenizer.tokenize(prompt, add_special_tokens=bool(special))
        limit = self.scenario.tokenizer_limit or 131072
        if len(ids) > limit:
            return _error(
                400, f"the prompt has {len(ids)} tokens, more than max_model_len {limit}", "invalid_request_error"
            )
        return JSONResponse({"count": len(ids), "max_model_len": limit, "tokens": ids, "token_strs": None})

    async def detokenize(self, request: Request) -> Response:
        try:
            ids = json.loads(await request.body())["tokens"]
        except (ValueError, KeyError, TypeError):
            return _error(400, "a JSON body with a tokens list is required", "invalid_request_error")
        text = self.tokenizer.detokenize(ids) if isinstance(ids, list) and all(type(i) is int for i in ids) else None
        if text is None:
            return _error(400, "tokens must be ids this server handed out", "invalid_request_error")
        return JSONResponse({"prompt": text})

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "scenario": self.scenario.name})

    async def models(self, request: Request) -> Response:
        # The names the rules give. A scenario whose rules name none answers any model name: it claims
        # none then (clients that check names, like `doctor`, skip the check for an empty list).
        names = sorted({r.model for r in self.scenario.rules if r.model not in (None, "*")})
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "scripted"} for name in names]
        return JSONResponse({"object": "list", "data": data})

    async def chat_completions(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            self._record(None, None, 400)
            return _error(400, f"request body is not JSON: {exc}", "invalid_json")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._record(None, None, 400)
            return _error(400, "request body must be an object with a 'messages' list", "invalid_request")

        facts = request_facts(body)
        rule_index = self.rules.select(facts)
        if rule_index is None:
            message = no_rule_message(self.scenario, facts)
            logger.warning(message)
            self._record(facts, None, 400)
            return _error(400, message, "no_rule_matched")

        rule = self.scenario.rules[rule_index]
        if rule.delay_s and not await self._delay(request, rule.delay_s):
            self._record(facts, rule_index, 499)
            return _error(503, "the client went away or the server is stopping", "delay_abandoned")
        if rule.fault is not None:
            return self._fault_response(rule.fault, facts, body, rule_index)
        try:
            reply = build_reply(rule, facts, body)
        except AgentStepError as exc:
            message = f"scenario {self.scenario.name!r} rule {rule_index} (agent step {facts.turn}): {exc}"
            logger.warning(message)
            self._record(facts, rule_index, 400)
            return _error(400, message, "agent_step_unresolved")
        return self._completion_response(reply, facts, body, rule_index)

    def _fault_response(self, fault: Fault, facts: RequestFacts, body: dict[str, Any], rule_index: int) -> Response:
        if fault.status is not None:
            self._record(facts, rule_index, fault.status)
            headers: dict[str, str] = {}
            if fault.retry_after_s:
                headers["retry-after-ms"] = str(int(fault.retry_after_s * 1000))
            if fault.retry_after is not None:
                headers["retry-after"] = str(fault.retry_after)
            return _error(fault.status, fault.message, "scripted_fault", headers=headers or None)
        if fault.invalid_body:
            self._record(facts, rule_index, 200)
            return Response(INVALID_BODY, status_code=200, media_type="application/json")
        if fault.drop:
            self._record(facts, rule_index, 0)
            return _DroppedAnswer()
        if fault.empty_choices:
            completion = build_completion(Reply(content=""), facts, body, rule_index)
            self._record(facts, rule_index, 200, completion.usage)
            return JSONResponse({**completion.model_dump(exclude_none=False), "choices": []})
        return self._completion_response(Reply(content=MALFORMED_CONTENT), facts, body, rule_index)

    def _completion_response(
        self, reply: Reply, facts: RequestFacts, body: dict[str, Any], rule_index: int
    ) -> Response:
        completion = build_completion(reply, facts, body, rule_index)
        self._record(facts, rule_index, 200, completion.usage)
        if body.get("stream"):
            events = stream_events(completion, body)

            async def emit() -> Any:
                for event in events:
                    yield event

            return StreamingResponse(emit(), media_type="text/event-stream", headers={"cache-control": "no-cache"})
        # ASCII JSON: a scripted reply may hold text that is not valid UTF-8 (unpaired surrogates,
        # written as \udcff escapes), as any endpoint's JSON may.
        content = json.dumps(completion.model_dump(exclude_none=False), ensure_ascii=True)
        return Response(content, status_code=200, media_type="application/json")


class ScriptedServer:
    """Runs the scripted model server with uvicorn on a background thread.

    ``start()`` returns the base URL (``http://HOST:PORT/v1``); port 0 picks a free port. Usable as
    a context manager (sync or async).
    """

    def __init__(self, scenario: Scenario, host: str = "127.0.0.1", port: int = 0) -> None:
        self.scenario = scenario
        self.host = host
        self.port = port
        self._model = ScriptedModel(scenario)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def requests(self) -> list[RequestRecord]:
        """The request log (a copy): model, turn, matched rule index, status."""
        return self._model.requests

    @property
    def base_url(self) -> str:
        if self._socket is None:
            raise RuntimeError("the scripted server is not started")
        return f"http://{self.host}:{self.port}/v1"

    def start(self, timeout_s: float = 10.0) -> str:
        if self._thread is not None:
            return self.base_url
        self._model.stopping.clear()
        # Bind here, so the actual port is known before uvicorn starts and port 0 works.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self._socket = sock
        config = uvicorn.Config(
            self._model.app(),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="scripted-model-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.01)
        if not self._server.started:
            self.stop()
            raise RuntimeError(f"scripted model server did not start on {self.host}:{self.port}")
        return self.base_url

    def stop(self) -> None:
        self._model.stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = None
        self._thread = None
        self._socket = None

    def __enter__(self) -> ScriptedServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedServer:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)


def serve(scenario_path: str | Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the server in the foreground until interrupted (the ``scripted-server`` CLI command)."""
    scenario = Scenario.load(scenario_path)
    model = ScriptedModel(scenario)
    print(
        f"scripted model server: scenario {scenario.name!r} ({len(scenario.rules)} rules) at http://{host}:{port}/v1",
        file=sys.stderr,
    )
    uvicorn.run(model.app(), host=host, port=port, log_level="info", access_log=False, lifespan="off")
