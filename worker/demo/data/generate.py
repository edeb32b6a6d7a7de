"""Generate the demo's bundled data: agent turns, the support knowledge base, the golden set and the labels.

Deterministic (a seeded ``random.Random``): running it twice writes the same bytes. Run it from the repository root:

    .venv/bin/python worker/demo/data/generate.py

Outputs, next to this file: ``turns.jsonl`` (one ``schemas.Turn`` per line, sorted by ``started_at``),
``labels.jsonl`` (per trace id: good or bad, the kind of defect, whether it lies in the injected regression),
``docs/kb.jsonl`` (the support knowledge base) and ``golden.jsonl`` (golden questions for the support bot).
The material is hand-written in ``material/*.yaml``; the generator only picks, combines and timestamps it.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ANCHOR = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)  # every started_at is at or before this instant
HISTORY = timedelta(days=8)  # the turns span [ANCHOR - 8 days, ANCHOR]
REGRESSION_WINDOW = timedelta(minutes=120)  # support-bot v2 turns start inside (ANCHOR - 120 min, ANCHOR]
REGRESSION_MARGIN = timedelta(minutes=10)  # no v1 support-bot turn starts in the 10 minutes before that window
SEED = 20261121

COUNTS = {"support-bot": 100, "support-bot-v2": 50, "travel-assistant": 60, "code-helper": 54}
# The deliberately bad turns outside the regression, by kind: 17 + 10 + 9 of 214 turns, about 17%.
BAD_KINDS = {
    "support-bot": {"hallucinated_policy": 5, "wrong_language": 3, "off_topic": 3, "prompt_injection": 3,
                    "truncated": 2, "empty": 1},
    "travel-assistant": {"too_many_bullets": 2, "usd_prices": 1, "booked_without_confirmation": 2,
                         "wrong_language": 1, "hallucinated_policy": 1, "off_topic": 1, "prompt_injection": 1,
                         "empty": 1},
    "code-helper": {"destructive_no_warning": 2, "hardcoded_secret": 1, "wrong_language": 1, "off_topic": 1,
                    "format_violation": 1, "truncated": 1, "prompt_injection": 1, "empty": 1},
}
REGRESSION_BAD_FRACTION = 0.78  # of the support-bot v2 turns
# The support bot's order tools: the items whose answers look an order up, and those that then refund it. Drawn from
# a random stream of their own (``Generator.tools``), so the rest of the data is the same with or without them.
LOOKUP_ITEMS = ("orders-tracking", "orders-status", "orders-modify", "orders-missing", "shipping-delays",
                "shipping-lost", "refunds-timing", "refunds-method", "warranty-claim")
REFUND_ITEMS = ("orders-cancel", "refunds-partial", "price-drop", "payments-double-charge", "damaged-delivery",
                "returns-exchange")
REFUND_LIMIT = 500  # euros: a larger refund goes to a person (the demo config's JSON check of the tool calls)

# --------------------------------------------------------------------------------------------------------------
# The hand-written material lives in material/*.yaml (the knowledge base and each agent's questions, answers,
# flows and injections); this file only picks, combines and timestamps it.
# --------------------------------------------------------------------------------------------------------------


def _material(name: str) -> dict:
    return yaml.safe_load((HERE / "material" / name).read_text(encoding="utf-8"))


_SUPPORT, _TRAVEL, _CODE = _material("support.yaml"), _material("travel.yaml"), _material("code.yaml")
KB = _material("kb.yaml")["kb"]
SUPPORT_SYSTEM = _SUPPORT["support_system"]
SUPPORT = _SUPPORT["support"]
SUPPORT_FLOWS = _SUPPORT["support_flows"]
SUPPORT_OFF_TOPIC = _SUPPORT["support_off_topic"]
SUPPORT_INJECTIONS = _SUPPORT["support_injections"]
SUPPORT_DRIFT = _SUPPORT["support_drift"]
TRAVEL_SYSTEMS = _TRAVEL["travel_systems"]
TRAVEL = _TRAVEL["travel"]
TRAVEL_FLOWS = _TRAVEL["travel_flows"]
TRAVEL_INJECTIONS = _TRAVEL["travel_injections"]
CODE_SYSTEM = _CODE["code_system"]
CODE = _CODE["code"]
CODE_FLOWS = _CODE["code_flows"]
CODE_INJECTIONS = _CODE["code_injections"]


# --------------------------------------------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------------------------------------------

MODELS = {"support-bot": "llama-3.1-8b-instruct", "support-bot-v2": "llama-3.2-3b-instruct",
          "travel-assistant": "mistral-small-3.1-24b-instruct", "code-helper": "qwen2.5-coder-14b-instruct"}
PROJECTS = {"support-bot": "acme-shop", "travel-assistant": "acme-travel", "code-helper": "acme-dev"}

# Traffic by hour of day (UTC): European customers, quiet at night.
HOUR_WEIGHT = [0.08, 0.05, 0.04, 0.04, 0.06, 0.12, 0.3, 0.55, 0.8, 0.95, 1.0, 1.0,
               0.95, 0.95, 1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.6, 0.4, 0.25, 0.12]

_KB = {doc_id: (title, text) for doc_id, title, text in KB}


def _supports(item: dict, kind: str) -> bool:
    """Whether an item has the material a defect of this kind needs."""
    if item.get("followup"):
        return False
    if (kind == "hallucinated_policy" and "wrong" in item) or (kind == "wrong_language" and "foreign" in item):
        return True
    if item.get("bad") and item["bad"][0] == kind:
        return True
    generic = {"off_topic", "prompt_injection", "truncated", "empty"} if "ref" in item else \
        {"prompt_injection", "truncated", "empty"}
    return kind in generic


class _Slot:
    """One turn to render: which item, in which session, and whether (and how) it is deliberately bad."""

    def __init__(self, agent: str, item: dict, session: int, position: int):
        self.agent, self.item, self.session, self.position = agent, item, session, position
        self.kind = "ok"
        self.regression = agent == "support-bot-v2"


class Generator:
    def __init__(self, seed: int = SEED):
        self.rng = random.Random(seed)
        self.tools = random.Random(seed + 1)  # the support bot's tool calls only
        self.used_hex: set[str] = set()

    # ---- small helpers ----

    def hex(self, digits: int) -> str:
        while True:
            value = f"{self.rng.getrandbits(digits * 4):0{digits}x}"
            if value not in self.used_hex:
                self.used_hex.add(value)
                return value

    def when(self, start: datetime, end: datetime) -> datetime:
        """A time in [start, end), weighted by the hour-of-day traffic curve."""
        span = (end - start).total_seconds()
        while True:
            moment = start + timedelta(seconds=self.rng.random() * span)
            if self.rng.random() < HOUR_WEIGHT[moment.hour]:
                return moment.replace(microsecond=self.rng.randrange(0, 1000) * 1000)

    @staticmethod
    def truncate(text: str, rng: random.Random) -> str:
        cut = int(len(text) * rng.uniform(0.3, 0.55))
        return text[:cut].rsplit(" ", 1)[0].rstrip(" ,;:-(")

    @staticmethod
    def tokens(*texts: str) -> int:
        return max(1, sum(len(t) for t in texts) // 4)

    # ---- planning: which items, grouped into sessions ----

    def plan(self, agent: str, items: list[dict], flows: list[list[str]], total: int, flow_share: float,
             first_session: int) -> list[_Slot]:
        by_key = {item["key"]: item for item in items}
        singles = [item for item in items if not item.get("followup")]
        deck: list[dict] = []
        slots: list[_Slot] = []
        session = first_session
        while len(slots) < total:
            if self.rng.random() < flow_share:
                chain = [by_key[key] for key in self.rng.choice(flows)]
            else:
                if not deck:
                    deck = singles[:]
                    self.rng.shuffle(deck)
                chain = [deck.pop()]
            for position, item in enumerate(chain[: total - len(slots)]):
                slots.append(_Slot(agent, item, session, position))
            session += 1
        return slots

    def choose_bad(self, slots: list[_Slot], quota: dict[str, int]) -> None:
        """Mark slots bad, so many of each kind. A kind an item has no material for (a hallucinated policy, a
        foreign-language answer, an item-specific defect) goes to an item that has it; a slot followed by a
        follow-up in its session is spared, so a conversation never continues from a broken premise."""
        eligible = [i for i, slot in enumerate(slots)
                    if not (i + 1 < len(slots) and slots[i + 1].session == slot.session
                            and slots[i + 1].item.get("followup"))]
        self.rng.shuffle(eligible)
        for kind, count in quota.items():
            fits = [i for i in eligible if slots[i].kind == "ok" and _supports(slots[i].item, kind)]
            if len(fits) < count:
                raise ValueError(f"{slots[0].agent}: only {len(fits)} slots can be {kind!r}, {count} wanted")
            for index in fits[:count]:
                slots[index].kind = kind

    def choose_regression(self, slots: list[_Slot], fraction: float) -> None:
        for index in self.rng.sample(range(len(slots)), round(fraction * len(slots))):
            slot = slots[index]
            options = [("drift", 6.0), ("drift_partial", 2.0)]
            if slot.item.get("wrong"):
                options.append(("hallucinated_policy", 2.0))
            names, weights = zip(*options)
            slot.kind = self.rng.choices(names, weights=weights)[0]

    # ---- rendering ----

    def contexts(self, doc_ids: list[str], degraded: bool) -> list[dict]:
        if degraded:  # the v2 index: the right documents fall out of the top 3
            picked = self.rng.sample([d for d in _KB if d not in doc_ids], 3)
            scored = [(d, self.rng.uniform(0.28, 0.52)) for d in picked]
        else:
            family = doc_ids[0].split("-")[1]
            near = [d for d in _KB if d not in doc_ids and d.split("-")[1] == family]
            far = [d for d in _KB if d not in doc_ids and d not in near]
            self.rng.shuffle(near)
            self.rng.shuffle(far)
            distractors = (near + far)[: 3 - len(doc_ids)] if len(near) >= 2 else (near + far[:2])[: 3 - len(doc_ids)]
            scored = [(d, self.rng.uniform(0.78, 0.93)) for d in doc_ids]
            scored += [(d, self.rng.uniform(0.41, 0.7)) for d in distractors]
        scored.sort(key=lambda pair: -pair[1])
        return [{"text": f"{_KB[d][0]}\n{_KB[d][1]}", "id": d, "score": round(s, 3)} for d, s in scored]

    def support_turn(self, slot: _Slot, history: list[dict]) -> tuple[dict, str]:
        item, rng = slot.item, self.rng
        question = rng.choice(item["q"])
        answer, reference, doc_ids, degraded = item["a"], item["ref"], item["docs"], False
        kind = slot.kind
        if kind == "hallucinated_policy":
            answer = item["wrong"]
        elif kind == "off_topic":
            answer = rng.choice(SUPPORT_OFF_TOPIC)
        elif kind == "empty":
            answer = ""
        elif kind == "truncated":
            answer = self.truncate(item["a"], rng)
        elif kind == "wrong_language":
            answer = item["foreign"][1]
        elif kind == "prompt_injection":
            question, answer = rng.choice(SUPPORT_INJECTIONS)
            reference, degraded = None, True  # nothing in the knowledge base matches an injection well
        elif kind == "drift":
            answer = rng.choice(SUPPORT_DRIFT)
            degraded = rng.random() < 0.65
        elif kind == "drift_partial":
            answer = item["a"].split(". ")[0].rstrip(".") + ". " + rng.choice(SUPPORT_DRIFT)
            degraded = rng.random() < 0.4
        if slot.regression and kind == "hallucinated_policy":
            degraded = rng.random() < 0.65
        if reference is not None and rng.random() < 0.15:
            reference = None  # not every conversation has a curated reference answer
        turn = {
            "system": SUPPORT_SYSTEM,
            "input": history + [{"role": "user", "content": question}],
            "output": answer,
            "contexts": self.contexts(doc_ids, degraded),
        }
        if reference is not None:
            turn["reference"] = reference
        if item["key"] in LOOKUP_ITEMS + REFUND_ITEMS:
            turn["tool_calls"] = self.support_tools(item["key"] in REFUND_ITEMS, bad=kind != "ok")
        return turn, question

    def support_tools(self, refund: bool, bad: bool) -> list[dict]:
        """Look the order up, and refund it for a refund item. A bad turn mostly refunds before looking the order
        up, or more than the limit, or retries a refund that failed; a turn whose words are fine now and then does
        one of those too (what only its actions show)."""
        rng = self.tools
        order = f"40-{rng.randrange(100_000, 999_999)}"
        lookup = {"name": "lookup_order", "arguments": {"order_id": order},
                  "result": json.dumps({"order_id": order, "status": rng.choice(["delivered", "shipped", "processing"])})}
        if not refund:
            return [lookup]
        amount = rng.choice([19.99, 49.0, 89.5, 129.0, 249.99])
        flaws = ["none", "refund_first", "over_limit", "failed_retry"]
        flaw = rng.choices(flaws, [0.2, 0.35, 0.25, 0.2] if bad else [0.8, 0.05, 0.1, 0.05])[0]
        if flaw == "over_limit":
            amount = rng.choice([649.0, 1199.0])
        refund_call = {"name": "issue_refund", "arguments": {"order_id": order, "amount": amount},
                       "result": json.dumps({"refund_id": f"rf-{rng.randrange(10_000, 99_999)}", "amount": amount})}
        if flaw == "refund_first":
            return [refund_call, lookup]
        if flaw == "failed_retry":
            failed = {"name": "issue_refund", "arguments": {"order_id": order, "amount": amount},
                      "error": "PaymentGatewayTimeout: no answer from the payment provider in 10 s"}
            return [lookup, failed, refund_call]
        return [lookup, refund_call]

    def assistant_turn(self, slot: _Slot, history: list[dict]) -> tuple[dict, str]:
        item, rng = slot.item, self.rng
        system = TRAVEL_SYSTEMS[item["system"]] if slot.agent == "travel-assistant" else CODE_SYSTEM
        question, answer, tools = rng.choice(item["q"]), item["a"], item.get("tools", [])
        kind = slot.kind
        if item.get("bad") and kind == item["bad"][0]:
            answer, tools = item["bad"][1], item.get("bad_tools", tools)
        elif kind == "truncated":
            answer = self.truncate(item["a"], rng)
        elif kind == "empty":
            answer = ""
        elif kind == "prompt_injection":
            pool = TRAVEL_INJECTIONS if slot.agent == "travel-assistant" else CODE_INJECTIONS
            question, answer, tools = rng.choice(pool)
        turn = {"system": system, "input": history + [{"role": "user", "content": question}], "output": answer}
        if tools:
            turn["tool_calls"] = [{"name": n, "arguments": args, "result": result} for n, args, result in tools]
        return turn, question

    def render(self, slots: list[_Slot], start: datetime, end: datetime) -> list[tuple[dict, dict]]:
        """Timestamps per session (follow-ups a little after the previous answer), ids, usage, metadata."""
        rows: list[tuple[dict, dict]] = []
        sessions: dict[int, list[_Slot]] = {}
        for slot in slots:
            sessions.setdefault(slot.session, []).append(slot)
        for session, members in sessions.items():
            agent = members[0].agent
            base_agent = "support-bot" if agent.startswith("support-bot") else agent
            session_id = f"{ {'support-bot': 'cs', 'travel-assistant': 'tr', 'code-helper': 'ide'}[base_agent]}-" \
                         f"{self.hex(12)}"
            moment = self.when(start, end - timedelta(minutes=6 * len(members)))
            history: list[dict] = []
            channel = self.rng.choice(["web", "web", "app"])
            region = self.rng.choice({"support-bot": ["eu"], "travel-assistant": ["eu", "eu", "uk"],
                                      "code-helper": ["eu", "eu", "us"]}[base_agent])
            for slot in members:
                if base_agent == "support-bot":
                    body, question = self.support_turn(slot, history)
                    latency = self.rng.uniform(0.8, 2.4) if slot.regression else self.rng.uniform(1.2, 3.6)
                    tags = ["demo", "rag", channel]
                    metadata = {"release": "v2" if slot.regression else "v1", "region": region, "channel": channel}
                else:
                    body, question = self.assistant_turn(slot, history)
                    latency = self.rng.uniform(1.8, 6.5) + 1.4 * len(body.get("tool_calls", []))
                    if base_agent == "travel-assistant":
                        persona = slot.item["system"]
                        tags = ["demo", persona]
                        metadata = {"release": "v1", "region": region, "persona": persona}
                    else:
                        ide = self.rng.choice(["vscode", "vscode", "jetbrains"])
                        tags = ["demo", "ide"]
                        metadata = {"release": "v1", "region": region, "ide": ide}
                if body["output"] == "":
                    latency = self.rng.uniform(0.3, 0.9)
                context_text = [c["text"] for c in body.get("contexts", [])]
                tool_text = [json.dumps(t) for t in body.get("tool_calls", [])]
                prompt_tokens = 40 + 6 * len(body["input"]) + self.tokens(
                    body["system"], *(m["content"] for m in body["input"]), *context_text, *tool_text)
                turn = {
                    "trace_id": self.hex(32),
                    "span_id": self.hex(16),
                    "session_id": session_id,
                    "project": PROJECTS[base_agent],
                    "agent": base_agent,
                    "environment": "production",
                    "started_at": moment.isoformat(timespec="milliseconds"),
                    "ended_at": (moment + timedelta(seconds=latency)).isoformat(timespec="milliseconds"),
                    **body,
                    "model": MODELS[agent],
                    "usage": {"prompt_tokens": prompt_tokens,
                              "completion_tokens": self.tokens(body["output"]) if body["output"] else 0},
                    "tags": tags,
                    "metadata": metadata,
                }
                label = {"trace_id": turn["trace_id"], "agent": base_agent,
                         "label": "good" if slot.kind == "ok" else "bad", "kind": slot.kind,
                         "regression": slot.regression}
                rows.append((turn, label))
                history = history + [{"role": "user", "content": question},
                                     {"role": "assistant", "content": body["output"]}]
                moment = moment + timedelta(seconds=latency + self.rng.uniform(20, 150))
        return rows

    # ---- everything ----

    def build(self) -> dict[str, list[dict]]:
        regression_start = ANCHOR - REGRESSION_WINDOW
        support = self.plan("support-bot", SUPPORT, SUPPORT_FLOWS, COUNTS["support-bot"], 0.3, 0)
        self.choose_bad(support, BAD_KINDS["support-bot"])
        v2 = self.plan("support-bot-v2", SUPPORT, SUPPORT_FLOWS, COUNTS["support-bot-v2"], 0.12, 10_000)
        self.choose_regression(v2, REGRESSION_BAD_FRACTION)
        travel = self.plan("travel-assistant", TRAVEL, TRAVEL_FLOWS, COUNTS["travel-assistant"], 0.25, 20_000)
        self.choose_bad(travel, BAD_KINDS["travel-assistant"])
        code = self.plan("code-helper", CODE, CODE_FLOWS, COUNTS["code-helper"], 0.2, 30_000)
        self.choose_bad(code, BAD_KINDS["code-helper"])

        rows = self.render(support, ANCHOR - HISTORY, regression_start - REGRESSION_MARGIN)
        rows += self.render(v2, regression_start + timedelta(minutes=3), ANCHOR)
        rows += self.render(travel, ANCHOR - HISTORY, ANCHOR)
        rows += self.render(code, ANCHOR - HISTORY, ANCHOR)
        rows.sort(key=lambda pair: pair[0]["started_at"])
        golden_items = sorted(self.rng.sample(SUPPORT, 24), key=lambda item: item["key"])
        return {
            "turns": [turn for turn, _ in rows],
            "labels": [label for _, label in rows],
            "kb": [{"id": doc_id, "title": title, "text": text} for doc_id, title, text in KB],
            "golden": [{"id": f"golden-{n:02d}", "question": item["q"][-1], "reference": item["ref"],
                        "doc_ids": item["docs"]} for n, item in enumerate(golden_items, 1)],
        }


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def render_files(seed: int = SEED) -> dict[str, str]:
    """Every output file's relative path and text."""
    data = Generator(seed).build()
    return {"turns.jsonl": _jsonl(data["turns"]), "labels.jsonl": _jsonl(data["labels"]),
            "docs/kb.jsonl": _jsonl(data["kb"]), "golden.jsonl": _jsonl(data["golden"])}


def main(out_dir: Path = HERE) -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from vigil.schemas import Turn

    files = render_files()
    for line in files["turns.jsonl"].splitlines():
        Turn.model_validate_json(line)
    for name, text in files.items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path} ({text.count(chr(10))} lines)")


if __name__ == "__main__":
    main()
