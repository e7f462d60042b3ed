"""A FastAPI-generated OpenAPI document for ``POST /v1/completions``, llama-cpp-python's shape.

How it was obtained: NOT llama-cpp-python's real document (that package was not
installed: it compiles llama.cpp). This small FastAPI app copies the *shape* of the
completions route in llama-cpp-python's ``llama_cpp/server/app.py`` (read in its source):
``response_model=Union[CreateCompletionResponse, str]`` with a ``responses`` override whose
200 declares ``application/json`` as an ``anyOf`` of the completion object and
``text/event-stream`` as ``{"type": "string"}`` (FastAPI's way of saying "a raw stream"),
bearer auth through ``HTTPBearer(auto_error=False)``, and FastAPI's automatic 422
``HTTPValidationError``. The request and response models follow OpenAI's completions
fields with the reference target's bounds, so that the embedded target is conformant
under it. ``python tests/fastapi_document.py`` (with fastapi installed; it was generated
with fastapi 0.165.0 and pydantic 2.14.4) rewrites ``FIXTURE``; the tests read the
fixture, and re-derive it when fastapi is importable.
"""

# No `from __future__ import annotations`: pydantic must see the local classes.

import json
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "fastapi_completions_openapi.json"


def build() -> dict[str, Any]:
    """Generate the document with FastAPI (imported here: it is not a test dependency)."""
    from typing import Literal, NotRequired

    from fastapi import Depends, FastAPI
    from fastapi.security import HTTPBearer
    from pydantic import BaseModel, Field
    from typing_extensions import TypedDict

    class CompletionLogprobs(TypedDict):
        text_offset: list[int]
        token_logprobs: list[float | None]
        tokens: list[str]
        top_logprobs: list[dict[str, float] | None]

    class CompletionChoice(TypedDict):
        text: str
        index: int
        logprobs: CompletionLogprobs | None
        finish_reason: Literal["stop", "length"] | None

    class CompletionUsage(TypedDict):
        prompt_tokens: int
        completion_tokens: int
        total_tokens: int

    class CreateCompletionResponse(TypedDict):
        id: str
        object: Literal["text_completion"]
        created: int
        model: str
        choices: list[CompletionChoice]
        usage: NotRequired[CompletionUsage]

    class StreamOptions(BaseModel):
        include_usage: bool | None = None

    class CreateCompletionRequest(BaseModel):
        model: str | None = Field(None, description="The model to use for generating completions.")
        prompt: str | list[str] | list[int] | list[list[int]] = Field(
            "", description="The prompt to generate completions for."
        )
        suffix: str | None = Field(None, description="A suffix to append to the completion.")
        max_tokens: int | None = Field(16, ge=0, description="The maximum number of tokens.")
        temperature: float = Field(0.8, ge=0, le=2)
        top_p: float = Field(0.95, ge=0, le=1)
        echo: bool = Field(False, description="Whether to echo the prompt.")
        stop: str | list[str] | None = Field(None, description="Stop sequences.")
        stream: bool = Field(
            False, description="Whether to stream the results as server-sent events."
        )
        stream_options: StreamOptions | None = None
        logprobs: int | None = Field(None, ge=0, le=5)
        presence_penalty: float | None = Field(0.0, ge=-2.0, le=2.0)
        frequency_penalty: float | None = Field(0.0, ge=-2.0, le=2.0)
        n: int | None = Field(1, ge=1, le=128)
        seed: int | None = Field(None)
        user: str | None = Field(None)

    app = FastAPI(title="🦙 llama.cpp Python API (shape)", version="0.0.1")
    bearer = HTTPBearer(auto_error=False)

    async def authenticate(authorization: Any = Depends(bearer)) -> None:  # noqa: B008 - FastAPI's idiom
        return None

    completion_json = {"$ref": "#/components/schemas/CreateCompletionResponse"}

    @app.post(
        "/v1/completions",
        summary="Completion",
        dependencies=[Depends(authenticate)],
        response_model=CreateCompletionResponse | str,
        responses={
            "200": {
                "description": "Successful Response",
                "content": {
                    "application/json": {
                        "schema": {
                            "anyOf": [completion_json],
                            "title": "Completion response, when stream=False",
                        }
                    },
                    "text/event-stream": {
                        "schema": {
                            "type": "string",
                            "title": "Server Side Streaming response, when stream=True. "
                            "See SSE format: https://developer.mozilla.org/en-US/docs/Web/"
                            "API/Server-sent_events/Using_server-sent_events"
                            "#Event_stream_format",
                            "example": "data: {... see CreateCompletionResponse ...} \\n\\n "
                            "data: ... \\n\\n ... data: [DONE]",
                        }
                    },
                },
            }
        },
    )
    async def create_completion(body: CreateCompletionRequest) -> Any:
        raise NotImplementedError  # only the document is used

    document: dict[str, Any] = app.openapi()
    return document


def load() -> dict[str, Any]:
    """The stored document."""
    document: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return document


if __name__ == "__main__":
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(build(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")
