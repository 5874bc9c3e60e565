"""The embedded broker's topic verdicts, asked without amqtt's plugin round.

amqtt asks its topic plugins about every publish, subscribe and delivery through
`PluginManager.map_plugin_topic`: a task per plugin per question, gathered. Under `mam up`
every new job brings new topics (its events, its state), so each job's first publish and
each delivery of its state to each subscriber paid that round: with 1,500 jobs submitted and
cancelled, a fifth of the process's CPU (a py-spy profile of `bench/paths.py --workload
jobs`). mam configures the topic plugins itself (`mam.broker.config`): `AclPlugin`, whose
verdict is a plain function of the session, topic and action (`AclPlugin.decide`). When the
broker's topic plugins are only those, `DirectVerdicts` calls them directly; any other topic
plugin sends every question through amqtt's round as before. Verdicts for everyone but a
job's own login are remembered (the policy is fixed for the broker's life; a job login's
answers change when its job ends).
"""

from __future__ import annotations

from amqtt.contexts import Action
from amqtt.plugins.base import BaseTopicPlugin
from amqtt.plugins.manager import PluginManager
from amqtt.session import Session

from mam.broker.acl import AclPlugin
from mam.contract.job_login import is_job_user

_UNKNOWN: list[AclPlugin] = []
"""`DirectVerdicts._deciders` before the first question."""


class DirectVerdicts:
    """Mixed into mam's amqtt broker (before `AmqttBroker`): `topic_allowed` and `verdict_now`."""

    MOST = 65_536

    plugins_manager: PluginManager

    verdicts: dict[tuple[str | None, str, str, Action], bool]
    """(user, client id, topic, action) -> the verdict, for sessions that are not a job's login."""

    def verdict_now(self, session: Session | None, topic: str | None, action: Action) -> bool | None:
        """The topic plugins' verdict if it is known without an await (always, under mam's own
        plugins); None when amqtt's round must be asked."""
        if session is None or not topic:
            return None
        memo = self.__dict__.setdefault("verdicts", {})
        job_login = is_job_user(session.username)
        key = (session.username, session.client_id or "", topic, action)
        if not job_login and (known := memo.get(key)) is not None:
            return known
        deciders = self._deciders()
        if deciders is None:
            return None
        verdict = all(plugin.decide(session, topic, action) for plugin in deciders)
        if not job_login:
            self._remember(key, verdict)
        return verdict

    async def topic_allowed(self, session: Session, topic: str, action: Action) -> bool:
        verdict = self.verdict_now(session, topic, action)
        if verdict is not None:
            return verdict
        verdict = await super().topic_allowed(session, topic, action)  # type: ignore[misc]
        if session is not None and topic and not is_job_user(session.username):
            self._remember((session.username, session.client_id or "", topic, action), verdict)
        return verdict

    def _remember(self, key: tuple[str | None, str, str, Action], verdict: bool) -> None:
        memo = self.verdicts
        if len(memo) >= self.MOST:
            memo.clear()
        memo[key] = verdict

    def _deciders(self) -> list[AclPlugin] | None:
        """The topic plugins, if every one is mam's `AclPlugin` (none: topic checks are off and every
        verdict is True, as amqtt answers); None if another kind is loaded."""
        found = self.__dict__.get("_acl_plugins", _UNKNOWN)
        if found is _UNKNOWN:
            topic_plugins = [p for p in self.plugins_manager.plugins if isinstance(p, BaseTopicPlugin)]
            found = topic_plugins if all(isinstance(p, AclPlugin) for p in topic_plugins) else None
            self.__dict__["_acl_plugins"] = found
        return found
