"""POSTs to a dashboard, for the landing and review tests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def post(url: str, content_type: str) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=b"{}", method="POST", headers={"content-type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
