"""The dashboard's JSON API as its tests call it (tests/web/test_dashboard_api*.py): every JSON answer validated
against the OpenAPI description the dashboard serves (`/api/openapi.json`), that description against the OpenAPI
3.1 schema itself."""

from __future__ import annotations

import json
import re
from typing import Any

from dashboard_server_support import request
from jsonschema import Draft202012Validator, FormatChecker
from openapi_spec_validator import validate as validate_spec

JSON = {"Content-Type": "application/json"}


class Api:
    """Requests to one dashboard; every JSON answer is validated against the schema its OpenAPI
    description gives for that route, method and status (a status it does not describe fails)."""

    def __init__(self, page: str, spec: dict[str, Any]) -> None:
        self.page, self.spec, self.checked = page, spec, 0

    @classmethod
    async def of(cls, page: str) -> Api:
        status, headers, body = await request(page, "GET", "/api/openapi.json")
        assert status == 200 and headers["content-type"] == "application/json"
        spec = json.loads(body)
        validate_spec(spec)  # the OpenAPI 3.1 schema (openapi-spec-validator)
        return cls(page, spec)

    def operation(self, method: str, path: str) -> dict[str, Any]:
        bare = path.split("?")[0]
        for template, item in self.spec["paths"].items():
            if re.fullmatch(re.sub(r"\\{[a-z_]+\\}", "[^/]+", re.escape(template)), bare):
                assert method.lower() in item, f"{method} {template} is not described"
                return item[method.lower()]
        raise AssertionError(f"{bare} is not described")

    def check(self, method: str, path: str, status: int, body: Any) -> None:
        responses = self.operation(method, path)["responses"]
        assert str(status) in responses, f"{method} {path}: status {status} is not described ({body})"
        schema = responses[str(status)]["content"]["application/json"]["schema"]
        validator = Draft202012Validator(
            {**schema, "components": self.spec["components"]}, format_checker=FormatChecker()
        )
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
        assert not errors, f"{method} {path} ({status}) does not match its description: {errors[:5]}"
        self.checked += 1

    async def call(
        self,
        method: str,
        path: str,
        payload: Any = None,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Any:
        data = raw if raw is not None else (json.dumps(payload).encode() if payload is not None else b"")
        got, _, body = await request(
            self.page,
            method,
            path,
            body=data,
            headers=headers if headers is not None else (JSON if method == "POST" else {}),
        )
        answer = json.loads(body)
        assert got == status, f"{method} {path}: {got} {answer}"
        self.check(method, path, got, answer)
        return answer

    async def get(self, path: str, status: int = 200) -> Any:
        return await self.call("GET", path, status=status)

    async def refused(self, path: str, *words: str, method: str = "GET", payload: Any = None, status: int = 400) -> str:
        """A bad request: `status`, and one line that names each of `words`."""
        message = (await self.call(method, path, payload, status=status))["error"]
        assert "\n" not in message and all(word in message for word in words), message
        return message


def ids(page: dict[str, Any]) -> list[str]:
    return [row["job_id"] for row in page["jobs"]]
