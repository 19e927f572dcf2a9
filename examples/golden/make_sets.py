#!/usr/bin/env python3
"""Writes the hand-designed golden sets of examples/golden (arithmetic,
dates, amounts, tool_json) deterministically; every expected answer is
computed here by Python (integer arithmetic, datetime), not typed in.

    python3 examples/golden/make_sets.py examples/golden
"""
import datetime
import json
import random
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "."
rng = random.Random(20261130)


def write(name, items):
    with open(f"{out}/{name}.jsonl", "w") as f:
        for it in items:
            f.write(json.dumps(it, ensure_ascii=False) + "\n")


# arithmetic: few-shot "Q: a op b = ?" -> the number; plus choice items
items = []
shots = "Q: 2 + 3 = ?\nA: 5\nQ: 9 - 4 = ?\nA: 5\n"
for i in range(20):
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    op = rng.choice("+-*")
    val = a + b if op == "+" else a - b if op == "-" else a * b
    items.append({"id": f"arith-{i:02d}", "bucket": "arithmetic", "prompt": f"{shots}Q: {a} {op} {b} = ?\nA:",
                  "max_tokens": 8, "stop": ["\n"], "check": {"number": val}})
for i in range(5):
    a, b = rng.randint(2, 20), rng.randint(2, 20)
    right = a + b
    opts = sorted({right, right + 1, right - 1, right + 10})
    items.append({"id": f"arith-choice-{i}", "bucket": "arithmetic", "prompt": f"{shots}Q: {a} + {b} = ?\nA:",
                  "check": {"choice": {"options": [f" {o}" for o in opts], "answer": opts.index(right)}}})
write("arithmetic", items)

# dates: ISO dates after adding days, weekdays, month names
items = []
for i in range(14):
    d = datetime.date(2020, 1, 1) + datetime.timedelta(days=rng.randint(0, 2500))
    n = rng.randint(1, 60)
    e = d + datetime.timedelta(days=n)
    items.append({"id": f"date-add-{i:02d}", "bucket": "dates",
                  "prompt": f"Answer with a date in YYYY-MM-DD form.\nWhat date is {n} days after {d.isoformat()}?\nAnswer:",
                  "max_tokens": 12, "stop": ["\n"],
                  "check": {"all": [{"regex": r"\d{4}-\d{2}-\d{2}"}, {"contains": e.isoformat()}]}})
for i in range(6):
    d = datetime.date(2021, 1, 1) + datetime.timedelta(days=rng.randint(0, 1500))
    items.append({"id": f"date-weekday-{i}", "bucket": "dates",
                  "prompt": f"Which day of the week was {d.strftime('%B %d, %Y').replace(' 0', ' ')}?\nAnswer:",
                  "max_tokens": 6, "stop": ["\n"], "check": {"contains": d.strftime("%A")}})
write("dates", items)

# amounts: extract a money amount from a ticket, as a number
items = []
names = ["refund", "invoice", "deposit", "charge", "payment"]
for i in range(20):
    cents = rng.randint(100, 2_000_000)
    amount = cents / 100
    text = f"{amount:,.2f}"
    cur = rng.choice(["$", "EUR ", "USD "])
    kind = rng.choice(names)
    items.append({"id": f"amount-{i:02d}", "bucket": "amounts",
                  "prompt": f"Ticket: Customer asks about the {kind} of {cur}{text} made last week.\n"
                            f"Extract the amount as a plain number.\nAmount:",
                  "max_tokens": 12, "stop": ["\n"], "check": {"number": amount, "tol": 0.005}})
write("amounts", items)

# tool_json: a tool call as JSON, validated against the tool's schema
tools = {
    "get_weather": {"type": "object", "required": ["city", "days"],
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}},
    "create_ticket": {"type": "object", "required": ["title", "priority"],
                      "properties": {"title": {"type": "string"},
                                     "priority": {"enum": ["low", "normal", "high"]},
                                     "tags": {"type": "array", "items": {"type": "string"}}}},
    "refund": {"type": "object", "required": ["order_id", "amount"],
               "properties": {"order_id": {"type": "string"}, "amount": {"type": "number", "minimum": 0}}},
}
asks = {
    "get_weather": ["What's the weather in {c} for the next {n} days?", "Forecast for {c}, {n} days please."],
    "create_ticket": ["Open a {p} priority ticket: {t}.", "File a ticket titled '{t}' with {p} priority."],
    "refund": ["Refund {a} on order {o}.", "Please give back {a} for order {o}."],
}
cities = ["Oslo", "Lima", "Osaka", "Nairobi", "Porto", "Denver"]
titles = ["printer offline", "password reset", "VPN drops", "invoice missing"]
items = []
for i in range(20):
    name = list(tools)[i % 3]
    ask = rng.choice(asks[name]).format(c=rng.choice(cities), n=rng.randint(1, 7), p=rng.choice(["low", "high"]),
                                         t=rng.choice(titles), a=f"{rng.randint(5, 500)}.{rng.randint(0, 99):02d}",
                                         o=f"A{rng.randint(10000, 99999)}")
    schema = {"type": "object", "required": ["name", "arguments"],
              "properties": {"name": {"enum": [name]}, "arguments": tools[name]}}
    sys_msg = ("You call tools. Reply with one JSON object {\"name\": ..., \"arguments\": {...}} and nothing else. "
               "Tools: " + json.dumps({k: v["required"] for k, v in tools.items()}))
    item = {"id": f"tool-{i:02d}", "bucket": "tool_json", "max_tokens": 64, "check": {"json_schema": schema}}
    if i % 2:
        item["messages"] = [{"role": "system", "content": sys_msg}, {"role": "user", "content": ask}]
    else:
        item["prompt"] = f"{sys_msg}\nUser: {ask}\nCall:"
        item["check"] = {"all": [{"json_valid": True}, {"json_schema": schema}]}
    items.append(item)
write("tool_json", items)
