"""Who may publish and read what on the embedded broker: mosquitto's `acl_file`, and mam's defaults.

One file serves mosquitto and mam alike: `user NAME` starts a user's section,
`topic [read|write|readwrite|deny] PATTERN` grants that user (or, before any
`user` line, anonymous clients) a topic filter, `pattern [...] PATTERN` grants
every client a filter in which `%u` is its user name and `%c` its client id;
`#` starts a comment. No access word means readwrite.

Without a file (`Policy`):

- anonymous (no password file): every topic is open, except the projector's;
- with a password file, under `mam up`: publish on the served workspace's
  `jobs/+/events` and `agents/+/status`, read all of `mam/<ws>/#`;
- with a password file, under `mam-broker` (no single workspace): publish on
  any `mam/+/jobs/+/events` and `mam/+/agents/+/status`, read `mam/#`; user
  `projector-<ws>` (docs/mosquitto.acl's name) also writes `<ws>`'s projector topics;
- a job's own login (`job:<id>`, `mam up` with a password file): `mam.broker.job_logins`
  decides, with or without a file.

The projector's topics (`jobs/+/state`, `rejected`, `projector/status`, and
the offers it makes runners, `agents/+/offers`) are written only by the
workspace's projector. Under `mam up` it publishes
in-process, so no network client may write them at all; under an anonymous
`mam-broker` only the client id `mam-projector-<ws>` may (client ids are no
secret: the signatures of `mam.contract.signing` remain the real guard); with an ACL
file, the file decides.

`AclPlugin` is amqtt's topic-checking hook (publish, subscribe, receive);
`WillPlugin` its authentication hook, used to drop at CONNECT a will the
client could not publish itself (amqtt publishes wills unchecked).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from amqtt.contexts import Action, BaseContext
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from amqtt.session import Session

from mam.contract.errors import UsageError
from mam.contract.job_login import is_job_user
from mam.contract.topics import PROJECTOR_WRITES, WRITER_WRITES, projector_owner, workspace_filter

if TYPE_CHECKING:
    from mam.broker.job_logins import JobLogins

log = logging.getLogger("mam.broker")

READ, WRITE = "read", "write"
_ACCESS = {
    "read": frozenset({READ}),
    "write": frozenset({WRITE}),
    "readwrite": frozenset({READ, WRITE}),
    "deny": frozenset(),
}


@dataclass(frozen=True, slots=True)
class Rule:
    access: frozenset[str]
    pattern: str


@dataclass(slots=True)
class AclFile:
    """A parsed mosquitto `acl_file`."""

    anonymous: list[Rule] = field(default_factory=list)
    users: dict[str, list[Rule]] = field(default_factory=dict)
    patterns: list[Rule] = field(default_factory=list)

    def rules(self, user: str | None, client_id: str) -> list[Rule]:
        """The rules that apply to this client, `%u`/`%c` filled in (a `%u` rule skips an anonymous client)."""
        own = self.users.get(user, []) if user is not None else self.anonymous
        filled = [
            Rule(rule.access, rule.pattern.replace("%u", user or "").replace("%c", client_id))
            for rule in self.patterns
            if user is not None or "%u" not in rule.pattern
        ]
        return own + filled


def parse_acl(text: str, source: str = "acl file") -> AclFile:
    acl, user = AclFile(), None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        rest = rest.strip()
        if word == "user" and rest:
            user = rest
            acl.users.setdefault(user, [])
            continue
        if word not in ("topic", "pattern") or not rest:
            raise UsageError(
                f"{source}:{number}: expected `user NAME`, `topic [ACCESS] FILTER` or "
                f"`pattern [ACCESS] FILTER`, got {line!r}"
            )
        access, _, pattern = rest.partition(" ")
        if access not in _ACCESS:
            access, pattern = "readwrite", rest
        pattern = pattern.strip()
        if not valid_filter(pattern):
            raise UsageError(f"{source}:{number}: {pattern!r} is not a valid MQTT topic filter")
        rule = Rule(_ACCESS[access], pattern)
        if word == "pattern":
            acl.patterns.append(rule)
        elif user is None:
            acl.anonymous.append(rule)
        else:
            acl.users[user].append(rule)
    return acl


def load_acl(path: Path) -> AclFile:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read --acl-file {path}: {exc.strerror}") from None
    return parse_acl(text, str(path))


def valid_filter(pattern: str) -> bool:
    levels = pattern.split("/")
    return bool(pattern) and all(
        ("#" not in level or (level == "#" and i == len(levels) - 1)) and ("+" not in level or level == "+")
        for i, level in enumerate(levels)
    )


def within(requested: str, allowed: str) -> bool:
    """Whether every topic `requested` (a name or a filter) can match is matched by `allowed`
    (MQTT 3.1.1 §4.7; a `$` topic only by a filter that names its first level)."""
    want, have = requested.split("/"), allowed.split("/")
    if want[0].startswith("$") and have[0] in ("#", "+"):
        return False
    for i, level in enumerate(have):
        if level == "#":
            return True
        if i >= len(want) or want[i] == "#" or (level != "+" and level != want[i]):
            return False
    return len(want) == len(have)


projector_topic = projector_owner
"""The workspace whose projector alone writes topic name `topic`, or None (`mam.contract.topics`)."""


@dataclass(frozen=True, kw_only=True)
class Policy:
    """What the embedded broker lets each client do (see the module's docstring)."""

    acl: AclFile | None = None
    login: bool = False
    """A password file is in force."""
    workspace: str | None = None
    """`mam up`'s workspace, whose projector runs in the broker's process."""
    projector_client: str | None = None
    """`mam up`: the client id of that projector's own connection, a secret that never leaves the process."""
    jobs: JobLogins | None = None
    """`mam up` with a password file: jobs' own logins (`job:<id>`, `mam.broker.job_logins`) and what they may do."""

    def may(self, access: str, user: str | None, client_id: str, topic: str) -> bool:
        if self.jobs is not None and is_job_user(user):
            return self.jobs.may(access, user, topic)  # type: ignore[arg-type]
        if access == WRITE and (verdict := self._projector_only(user, client_id, topic)) is not None:
            return verdict
        if self.acl is not None:
            return self._by_rules(self.acl.rules(user, client_id), access, topic)
        if not self.login:
            return True
        return self._by_rules(self._default_rules(user), access, topic)

    def may_receive(self, user: str | None, client_id: str, topic: str) -> bool:
        """Whether a message on `topic` may be delivered to this client (a job's login: see `JobLogins.may_receive`)."""
        if self.jobs is not None and is_job_user(user):
            return self.jobs.may_receive(user, topic)  # type: ignore[arg-type]
        return self.may(READ, user, client_id, topic)

    def _projector_only(self, user: str | None, client_id: str, topic: str) -> bool | None:
        """For a projector topic under `mam up` or an anonymous `mam-broker`: whether this client is
        the workspace's projector. None if the rules decide (any other topic, or an ACL or login)."""
        ws = projector_topic(topic)
        if ws is None:
            return None
        if self.workspace is not None:
            return self.projector_client is not None and client_id == self.projector_client and ws == self.workspace
        if self.acl is not None or self.login:
            return None
        return client_id == f"mam-projector-{ws}"

    def _default_rules(self, user: str | None) -> list[Rule]:
        rules = [Rule(_ACCESS["write"], workspace_filter(self.workspace or None, rest)) for rest in WRITER_WRITES]
        rules.append(Rule(_ACCESS["read"], workspace_filter(self.workspace or None)))
        if self.workspace is None and user is not None and user.startswith("projector-"):
            own = user.removeprefix("projector-")
            rules += [
                Rule(_ACCESS["write"], workspace_filter(own, rest))
                for rest in PROJECTOR_WRITES
                if own and not any(c in own for c in "+#/")
            ]
        return rules

    @staticmethod
    def _by_rules(rules: list[Rule], access: str, topic: str) -> bool:
        """Granted by a rule, and not inside a `deny` filter (which wins, as in mosquitto)."""
        if any(not rule.access and within(topic, rule.pattern) for rule in rules):
            return False
        return any(access in rule.access and within(topic, rule.pattern) for rule in rules)


class Refusals:
    """Logs a client's first refused publish or subscribe, not every one after it."""

    MOST = 4096

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, client_id: str, what: str, topic: str) -> None:
        if client_id in self._seen:
            return
        if len(self._seen) >= self.MOST:
            self._seen.clear()
        self._seen.add(client_id)
        log.warning("refused client %s: %s %s (its later refusals are not logged)", client_id, what, topic)


_POLICIES: dict[str, Policy] = {}


def register(policy: Policy) -> str:
    """A key for `policy` that the plugins' configuration can carry (amqtt configures plugins with plain data)."""
    key = str(id(policy))
    _POLICIES[key] = policy
    return key


def policy_of(key: str) -> Policy:
    """The policy `register` gave `key` (what a plugin's configuration names)."""
    return _POLICIES[key]


def unregister(key: str) -> None:
    _POLICIES.pop(key, None)


class AclPlugin(BaseTopicPlugin):
    """amqtt's topic-checking hook: PUBLISH (dropped after its acknowledgement: MQTT 3.1.1 has no
    negative PUBACK), SUBSCRIBE (refused with 0x80) and delivery to each subscriber."""

    @dataclass
    class Config:
        policy: str = ""

    def __init__(self, context: BaseContext) -> None:
        super().__init__(context)
        self.policy = _POLICIES[self.config.policy]
        self.refused = Refusals()

    async def topic_filtering(
        self, *, session: Session | None = None, topic: str | None = None, action: Action | None = None
    ) -> bool | None:
        return self.decide(session, topic, action)

    def decide(self, session: Session | None, topic: str | None, action: Action | None) -> bool:
        """The verdict, without an await: what `topic_filtering` answers amqtt, and what mam's broker
        asks directly (`mam.broker.verdicts`)."""
        if session is None or topic is None:
            return True
        user, client_id = session.username, session.client_id or ""
        if action == Action.PUBLISH:
            allowed = self.policy.may(WRITE, user, client_id, topic)
            if not allowed:
                self.refused(client_id, "publish on", topic)
            return allowed
        if action == Action.SUBSCRIBE:
            allowed = self.policy.may(READ, user, client_id, topic)
            if not allowed:
                self.refused(client_id, "subscribe to", topic)
            return allowed
        return self.policy.may_receive(user, client_id, topic)


class WillPlugin(BaseAuthPlugin):
    """amqtt's authentication hook, deciding nothing (None) but dropping a will the client
    may not publish: amqtt publishes a will without asking the topic plugins.

    It also clears amqtt's `is_anonymous` mark, which amqtt's anonymous plugin puts on every
    session and which makes amqtt drop an anonymous persistent session when it disconnects
    (CONNACK then says "no session present") and queue nothing for it: MQTT-3.1.2-4/5 ask
    for the session and the queueing, login or not, as mosquitto keeps them.
    """

    @dataclass
    class Config:
        policy: str = ""

    def __init__(self, context: BaseContext) -> None:
        super().__init__(context)
        self.policy = _POLICIES[self.config.policy]
        self.refused = Refusals()

    async def authenticate(self, *, session: Session) -> bool | None:
        session.is_anonymous = False
        topic = session.will_topic
        if session.will_flag and topic and not self.policy.may(WRITE, session.username, session.client_id or "", topic):
            self.refused(session.client_id or "", "will on", topic)
            session.will_flag = False
            session.will_topic = session.will_message = None
        return None
