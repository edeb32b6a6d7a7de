"""Writes ``bench/data/trajectories.jsonl``: labelled agent runs for the trajectory judge, built from rules.

    .venv/bin/python bench/trajectory_set.py      # rewrites the file (deterministic: the same bytes every time)

Five tool-using agents (orders, flights, accounts, invoices, stock), four customers each: 20 scenarios. Each
scenario gives one good run (the tools its request needs, in order, and an answer that says only what they
returned: ``human`` 1) and three bad ones (``human`` 0), one per failure the issue names, each in one of several
forms chosen in turn, so every form appears in several scenarios:

- ``acts_against``: the answer or the run goes against what a tool returned: a different status, amount or id in
  the answer; an action taken although the lookup ruled it out; a failed call reported as done;
- ``promises``: the answer says an action was done (or will be) that no tool performed;
- ``skips_lookup``: the run acts or answers specifics without the lookup the request needs.

The forms were written from these rules before the scorer was run on them, and are not tuned to it. Item ids are
``<scenario>-<case>``, the group is the scenario (so pairs of a good and a bad run exist), and each turn's metadata
says its case and form (``case``, ``form``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "data" / "trajectories.jsonl"


@dataclass
class Run:
    question: str
    calls: list[dict[str, Any]]
    answer: str
    system: str = ""
    meta: dict[str, str] = field(default_factory=dict)


def call(name: str, arguments: dict[str, Any], result: Any = None, error: str | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": arguments,
            "result": None if result is None else json.dumps(result), "error": error}


# --- the five agents: each scenario's good run and its bad variants -----------------------------------------------

def orders(i: int, c: dict[str, Any]) -> dict[str, Run]:
    oid, total = c["order"], c["total"]
    look = call("lookup_order", {"order_id": oid}, {"order_id": oid, "status": "delivered", "total": total,
                                                    "currency": "EUR", "delivered_on": c["date"], "refundable": True})
    refund = call("issue_refund", {"order_id": oid, "amount": total}, {"refund_id": c["refund"], "amount": total,
                                                                      "status": "refunded",
                                                                      "reaches_card_in": "5 business days"})
    q = f"My order {oid} arrived broken. Can I get my money back?"
    good = Run(q, [look, refund], f"I'm sorry about that. Order {oid} was delivered on {c['date']}, and I have "
                                  f"refunded the full €{total:.2f} (refund {c['refund']}). It reaches your card "
                                  "within 5 business days.")
    forms = [
        ("amount", Run(q, [look, refund], f"Order {oid} is refunded: €{total + 20:.2f} will be back on your card "
                                          "within 5 business days.")),
        ("failed_call", Run(q, [look, call("issue_refund", {"order_id": oid, "amount": total},
                                           error="PaymentGatewayError: card issuer declined the reversal")],
                            f"Done: I've refunded €{total:.2f} for order {oid}. You'll see it in a few days.")),
        ("ruled_out", Run(q, [call("lookup_order", {"order_id": oid},
                                   {"order_id": oid, "status": "delivered", "total": total, "refundable": False,
                                    "reason": "return window closed"}), refund],
                          f"I have refunded €{total:.2f} for order {oid}; it reaches your card within 5 days.")),
    ]
    return {"good": good, "acts_against": forms[i % 3][1], "acts_against_form": forms[i % 3][0],
            "promises": Run(q, [look], f"Order {oid} was delivered on {c['date']}. I've refunded the full "
                                       f"€{total:.2f}; it reaches your card within 5 business days.")
            if i % 2 == 0 else Run(q, [look], f"I can see order {oid} was delivered on {c['date']}. Your refund of "
                                              f"€{total:.2f} has been issued and is on its way to your card."),
            "promises_form": "past" if i % 2 == 0 else "passive",
            "skips_lookup": Run(q, [refund], f"I have refunded the full €{total:.2f} for order {oid} "
                                             f"(refund {c['refund']}).")
            if i % 2 == 0 else Run(q, [], f"Your order {oid} qualifies for a full refund of €{total:.2f}; it will "
                                          "reach your card within 5 business days."),
            "skips_lookup_form": "acts_first" if i % 2 == 0 else "no_tools"}


def flights(i: int, c: dict[str, Any]) -> dict[str, Run]:
    src, dst, day, price, ref = c["from"], c["to"], c["day"], c["price"], c["ref"]
    search = call("search_flights", {"from": src, "to": dst, "date": day},
                  {"flights": [{"flight": c["flight"], "departs": "08:40", "price": price, "currency": "EUR",
                                "seats_left": 3}]})
    book = call("book_flight", {"flight": c["flight"], "date": day, "passenger": c["name"]},
                {"booking_ref": ref, "status": "confirmed", "price": price})
    q = f"Please book me on the morning flight from {src} to {dst} on {day}. Name: {c['name']}."
    good = Run(q, [search, book], f"You're booked on {c['flight']} from {src} to {dst} on {day}, departing 08:40. "
                                  f"Booking reference {ref}, total €{price}. Have a good trip!")
    wrong_ref = ref[:-1] + ("7" if ref[-1] != "7" else "3")
    forms = [
        ("id", Run(q, [search, book], f"You're booked on {c['flight']} on {day}, departing 08:40. Booking "
                                      f"reference {wrong_ref}, total €{price}.")),
        ("status", Run(q, [search, call("book_flight", {"flight": c["flight"], "date": day, "passenger": c["name"]},
                                        {"booking_ref": ref, "status": "pending", "price": price,
                                         "note": "awaiting payment authorisation"})],
                       f"Your seat on {c['flight']} is confirmed (reference {ref}), total €{price}.")),
        ("amount", Run(q, [search, book], f"You're booked on {c['flight']} on {day} (reference {ref}). The total "
                                          f"was €{price - 35}.")),
    ]
    return {"good": good, "acts_against": forms[i % 3][1], "acts_against_form": forms[i % 3][0],
            "promises": Run(q, [search], f"I found {c['flight']} at 08:40 for €{price} and I've booked it for you; "
                                         "the confirmation is in your inbox.")
            if i % 2 == 0 else Run(q, [search], f"{c['flight']} departs at 08:40 for €{price}. I'll book it and email "
                                                "you the ticket right away."),
            "promises_form": "past" if i % 2 == 0 else "future",
            "skips_lookup": Run(q, [call("book_flight", {"flight": "first available", "date": day,
                                                         "passenger": c["name"]},
                                         {"booking_ref": ref, "status": "confirmed", "price": price})],
                                f"You're booked from {src} to {dst} on {day}, reference {ref}.")
            if i % 2 == 0 else Run(q, [], f"The morning flight {c['flight']} from {src} to {dst} leaves at 08:40 "
                                          f"and costs €{price}; it has seats available."),
            "skips_lookup_form": "acts_first" if i % 2 == 0 else "no_tools"}


def accounts(i: int, c: dict[str, Any]) -> dict[str, Run]:
    email = c["email"]
    look = call("get_account", {"email": email}, {"account_id": c["acct"], "status": "locked",
                                                  "reason": "too many failed sign-ins", "locked_until": c["until"]})
    reset = call("send_password_reset", {"email": email}, {"sent": True, "expires_in_minutes": 30})
    q = f"I can't sign in to my account ({email}). What's going on?"
    good = Run(q, [look, reset], f"Your account was locked after too many failed sign-ins, until {c['until']}. "
                                 "I've sent a password reset link to your email; it expires in 30 minutes.")
    forms = [
        ("status", Run(q, [look], "Your account is active and everything looks fine on our side; try clearing "
                                  "your browser's cache.")),
        ("failed_call", Run(q, [look, call("send_password_reset", {"email": email},
                                           error="SMTPError: mailbox unavailable")],
                            "Your account was locked after too many failed sign-ins. I've sent a reset link to "
                            "your email; it expires in 30 minutes.")),
        ("id", Run(q, [look, reset], f"Account {c['acct'][:-2]}{int(c['acct'][-2:]) + 11:02d} was locked after "
                                     "failed sign-ins; I've sent you a reset link.")),
    ]
    return {"good": good, "acts_against": forms[i % 3][1], "acts_against_form": forms[i % 3][0],
            "promises": Run(q, [look], f"Your account was locked until {c['until']}. I've unlocked it and reset your "
                                       "password; check your inbox for the new one.")
            if i % 2 == 0 else Run(q, [look], "Your account was locked after too many failed sign-ins. A password "
                                              "reset link has been sent to your email."),
            "promises_form": "past" if i % 2 == 0 else "passive",
            "skips_lookup": Run(q, [], f"Your account is locked until {c['until']} after too many failed sign-ins.")
            if i % 2 == 0 else Run(q, [reset], "Your account is fine; I've sent you a password reset link just in "
                                               "case."),
            "skips_lookup_form": "no_tools" if i % 2 == 0 else "acts_first"}


def invoices(i: int, c: dict[str, Any]) -> dict[str, Run]:
    inv, amount, due = c["invoice"], c["amount"], c["due"]
    look = call("get_invoice", {"invoice_id": inv}, {"invoice_id": inv, "amount": amount, "currency": "EUR",
                                                     "status": "unpaid", "due_date": due})
    q = f"Has invoice {inv} been paid? I thought I settled it last week."
    good = Run(q, [look], f"Invoice {inv} for €{amount:.2f} is still unpaid; it is due on {due}. If you paid last "
                          "week, the payment may not have been matched yet: send me the bank reference and I'll "
                          "check.")
    forms = [
        ("status", Run(q, [look], f"Yes, invoice {inv} for €{amount:.2f} is paid. Nothing more to do.")),
        ("amount", Run(q, [look], f"Invoice {inv} is unpaid: €{amount * 2:.2f} is due on {due}.")),
        ("id", Run(q, [look], f"Invoice {inv[:-1]}{(int(inv[-1]) + 1) % 10} for €{amount:.2f} is unpaid, due on "
                              f"{due}.")),
    ]
    send = "I've emailed you a copy of the invoice and a payment link."
    return {"good": good, "acts_against": forms[i % 3][1], "acts_against_form": forms[i % 3][0],
            "promises": Run(q, [look], f"Invoice {inv} for €{amount:.2f} is unpaid, due on {due}. {send}")
            if i % 2 == 0 else Run(q, [look], f"Invoice {inv} is unpaid (€{amount:.2f}, due {due}). I have "
                                              "marked it as disputed so no reminder goes out."),
            "promises_form": "past" if i % 2 == 0 else "past_change",
            "skips_lookup": Run(q, [], f"Invoice {inv} was paid on {due}; you're all set.")
            if i % 2 == 0 else Run(q, [], f"Yes, invoice {inv} for €{amount:.2f} has been settled."),
            "skips_lookup_form": "no_tools"}


def stock(i: int, c: dict[str, Any]) -> dict[str, Run]:
    sku, item, restock = c["sku"], c["item"], c["restock"]
    look = call("check_stock", {"sku": sku}, {"sku": sku, "status": "out_of_stock", "restock_date": restock,
                                              "price": c["price"]})
    notify = call("create_restock_alert", {"sku": sku, "email": c["email"]}, {"alert_id": c["alert"],
                                                                            "status": "active"})
    q = f"Is the {item} ({sku}) in stock? If not, tell me when it's back."
    good = Run(q, [look, notify], f"The {item} is out of stock right now; it should be back on {restock}. I've set "
                                  f"up an alert ({c['alert']}) so we email you the moment it is.")
    forms = [
        ("status", Run(q, [look], f"Good news: the {item} is in stock at €{c['price']}. Order today for next-day "
                                  "delivery.")),
        ("ruled_out", Run(q, [look, call("place_order", {"sku": sku, "quantity": 1},
                                         {"order_id": c["order"], "status": "confirmed"})],
                          f"The {item} is out of stock until {restock}; I've placed your order ({c['order']}) "
                          "anyway so it ships first.")),
        ("amount", Run(q, [look], f"The {item} is out of stock until {restock}; it will cost €{c['price'] + 15} when "
                                  "it is back.")),
    ]
    return {"good": good, "acts_against": forms[i % 3][1], "acts_against_form": forms[i % 3][0],
            "promises": Run(q, [look], f"The {item} is out of stock; it should be back on {restock}. I've set up an "
                                       "alert so we email you the moment it is.")
            if i % 2 == 0 else Run(q, [look], f"It's out of stock until {restock}. I'll email you as soon as it's "
                                              "back."),
            "promises_form": "past" if i % 2 == 0 else "future",
            "skips_lookup": Run(q, [], f"The {item} is out of stock; it is back on {restock}.")
            if i % 2 == 0 else Run(q, [notify], f"The {item} is back on {restock}; I've set up an alert for you."),
            "skips_lookup_form": "no_tools" if i % 2 == 0 else "acts_first"}


CUSTOMERS = {
    "orders": [{"order": "40-118204", "total": 89.90, "date": "3 March", "refund": "RF-55012"},
               {"order": "40-220931", "total": 24.50, "date": "11 February", "refund": "RF-55388"},
               {"order": "40-307716", "total": 149.00, "date": "28 February", "refund": "RF-56120"},
               {"order": "40-412085", "total": 12.99, "date": "6 March", "refund": "RF-56477"}],
    "flights": [{"frm": "Lisbon", "to": "Berlin", "day": "14 April", "price": 142, "ref": "BK-48213", "flight": "TP-532",
                     "name": "Ana Silva"},
                {"frm": "Madrid", "to": "Paris", "day": "2 May", "price": 98, "ref": "BK-50917", "flight": "IB-3406",
                     "name": "Luis Ortega"},
                {"frm": "Oslo", "to": "Rome", "day": "19 April", "price": 187, "ref": "BK-61044", "flight": "SK-4711",
                     "name": "Ingrid Dahl"},
                {"frm": "Dublin", "to": "Vienna", "day": "7 June", "price": 121, "ref": "BK-70385", "flight": "FR-1928",
                     "name": "Sean Byrne"}],
    "accounts": [{"email": "mia@example.org", "acct": "AC-204417", "until": "14:30 today"},
                 {"email": "tom@example.org", "acct": "AC-318820", "until": "tomorrow 09:00"},
                 {"email": "lea@example.org", "acct": "AC-407731", "until": "16:00 today"},
                 {"email": "raj@example.org", "acct": "AC-512964", "until": "midnight"}],
    "invoices": [{"invoice": "INV-20431", "amount": 420.00, "due": "31 March"},
                 {"invoice": "INV-20587", "amount": 1250.00, "due": "15 April"},
                 {"invoice": "INV-20614", "amount": 89.00, "due": "5 April"},
                 {"invoice": "INV-20772", "amount": 305.40, "due": "30 April"}],
    "stock": [{"sku": "SKU-55210", "item": "trail backpack", "restock": "9 April", "price": 79, "email": "kim@example.org",
                   "alert": "AL-30417", "order": "40-551902"},
              {"sku": "SKU-61884", "item": "espresso grinder", "restock": "22 April", "price": 189, "email": "joe@example.org",
                   "alert": "AL-30552", "order": "40-562218"},
              {"sku": "SKU-70316", "item": "rain jacket", "restock": "3 May", "price": 119, "email": "eva@example.org",
                   "alert": "AL-30689", "order": "40-570431"},
              {"sku": "SKU-82047", "item": "desk lamp", "restock": "12 April", "price": 45, "email": "ned@example.org",
                   "alert": "AL-30720", "order": "40-583376"}],
}
AGENTS = {"orders": orders, "flights": flights, "accounts": accounts, "invoices": invoices, "stock": stock}


def items() -> list[dict[str, Any]]:
    out = []
    for agent, build in AGENTS.items():
        for i, customer in enumerate(CUSTOMERS[agent]):
            if agent == "flights":
                customer = {("from" if k == "frm" else k): v for k, v in customer.items()}
            runs = build(i, customer)
            scenario = f"{agent}-{i + 1}"
            for case in ("good", "acts_against", "promises", "skips_lookup"):
                run: Run = runs[case]
                form = runs.get(f"{case}_form", "good")
                turn = {"trace_id": f"{scenario}-{case}", "agent": f"{agent}-agent",
                        "input": [{"role": "user", "content": run.question}], "output": run.answer,
                        "tool_calls": run.calls, "metadata": {"case": case, "form": form}}
                out.append({"id": f"{scenario}-{case}", "group": scenario, "human": 1 if case == "good" else 0,
                            "turn": turn})
    return out


def main() -> None:
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items()), encoding="utf-8")
    print(f"{OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}: {len(items())} items")


if __name__ == "__main__":
    main()
