"""`POST /api/jobs` and the other writes refuse a body in mam's words, against a real `mam up --dashboard`: every
missing field named at once (`{}` named only `prompt` before), an unknown field with the nearest known one, a
value out of range with the range, its unit and where to read more (msgspec's "Expected `int` <= 1000" before),
a body that is not JSON said so; generated out-of-range and wrong-type numbers for every numeric option
(hypothesis) are each a 400 naming the field, none in a library's wording. Every answer is checked against the
OpenAPI description (`dashboard_api_support.Api`)."""

from __future__ import annotations

import json

from dashboard_api_support import Api
from dashboard_support import up_dashboard_process
from refusal_words_support import drawn, in_mams_words, refused_option

from mam.contract import job_spec

from workspace_support import WorkspacePaths


async def test_a_job_body_is_refused_in_mams_words(ws: WorkspacePaths) -> None:
    async with up_dashboard_process(ws) as (_, page, _):
        api = await Api.of(page)
        post = {"method": "POST"}
        assert (
            await api.refused("/api/jobs", **post, payload={})
            == "missing required fields: prompt, agent (see docs/api.md)"
        )
        assert (
            await api.refused("/api/jobs", **post, payload={"agent": "shell", "prompt": None})
            == "missing required field: prompt (see docs/api.md)"
        )
        assert (
            await api.refused("/api/jobs", **post, payload={"agent": "shell", "prompt": "p", "priority": 99999999})
            == "priority: 99999999 is out of range: give -1000 to 1000 (higher runs first; docs/api.md)"
        )
        typo = await api.refused("/api/jobs", **post, payload={"agent": "shell", "prompt": "p", "job_timout": 2})
        assert typo.startswith("unknown field 'job_timout'; did you mean 'job_timeout'? known: prompt, agent, "), typo
        huge = await api.call(
            "POST", "/api/jobs", None, raw=b'{"agent": "a", "prompt": "p", "job_timeout": 1e400}', status=400
        )
        assert huge["error"].startswith(
            "job_timeout: Infinity is out of range: give more than 0 and at most 2,678,400 seconds ("
        ), huge
        broken = await api.call("POST", "/api/jobs", None, raw=b'{"agent": "a",}', status=400)
        assert broken["error"].startswith("bad request: the body is not JSON: "), broken
        in_mams_words(broken["error"], names="at byte 14")

        tree = await api.refused("/api/jobs/nosuch/cancel", **post, payload={"tree": "yes"})
        assert tree.startswith('tree: "yes" is not true or false ('), tree
        retry = await api.refused("/api/jobs/nosuch/retry", **post, payload={"job_id": 5})
        assert retry.startswith("job_id: 5 is not text ("), retry
        await api.call("POST", "/api/jobs", {"agent": "nobody", "prompt": "p", "job_id": "queued1"}, status=201)
        assert (
            await api.refused("/api/jobs/queued1/answer", **post, payload={})
            == "missing required field: answer (see docs/api.md)"
        )
        answer = await api.refused("/api/jobs/queued1/answer", **post, payload={"answer": 5})
        assert answer.startswith("answer: 5 is not text ("), answer

        for name, value in drawn(44, 80, refused_option()):
            said = await api.refused("/api/jobs", **post, payload={"agent": "shell", "prompt": "p", name: value})
            in_mams_words(said, names=f"{name}: ")
            assert said.endswith("; docs/api.md)") and json.dumps(value)[:20] in said, said
            if job_spec.UNITS.get(name) and "give " in said:
                assert f" {job_spec.UNITS[name]} (" in said, said
