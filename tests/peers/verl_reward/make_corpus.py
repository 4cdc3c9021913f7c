"""Writes a seeded corpus of requests for the reward peer test: near-miss responses for
verl's gsm8k, MATH (math_reward), math_dapo and TinyZero's countdown rewards, and random
validation batches for process_validation_metrics. One JSON request per line (the format of
tests/tools/reward_peer.cc). Usage: make_corpus.py COUNT SEED OUT.jsonl"""
import json
import random
import sys

count, seed, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(seed)

NOISE = [" ", ",", ".", "$", "\\", "{", "}", "(", ")", "-", "0", "1", "7", "=", ":", "\n", "%", "#",
         "é", "中", "²", "٣", "\u00a0", "\u2003", "\u017f", "\t", "\x1c", "/", "^", "a", "s"]
FILLER = ["Let me think. ", "First, 3 + 4 = 7. ", "So the total is 12, ", "We get $x = 5$. ",
          "Now 1,000 - 250 = 750.\n", "The price is $18.50. ", "Thus ", "Hence 2 * 3 = 6.\n",
          "Ünïcödé tëxt 中文 ", "Answer is coming. ", "\\frac{1}{2} of it. "]


def mutate(s):
    for _ in range(rng.randint(1, 3)):
        if not s or rng.random() < 0.5:
            i = rng.randint(0, len(s))
            s = s[:i] + rng.choice(NOISE) + s[i:]
        else:
            i = rng.randrange(len(s))
            s = s[:i] + s[i + 1:]
    return s


def filler(long=False):
    n = rng.randint(20, 60) if long else rng.randint(0, 4)
    return "".join(rng.choice(FILLER) for _ in range(n))


def number_text():
    kind = rng.random()
    if kind < 0.5:
        v = str(rng.randint(-50, 5000))
    elif kind < 0.7:
        v = f"{rng.randint(0, 999)}.{rng.randint(0, 99)}"
    else:
        v = f"{rng.randint(1, 99)},{rng.randint(0, 999):03d}"
    return v


def gsm8k():
    gt = number_text().replace(",", "")
    ans = rng.choice([gt, gt, f"{int(float(gt)):,}" if "." not in gt else gt, "$" + gt, gt + ".", "-" + gt,
                      gt + ".0", number_text()])
    mark = rng.choice(["#### ", "#### ", "####", "### ", "#### -", "####  ", "#### $"])
    body = filler(rng.random() < 0.2) + mark + ans + rng.choice(["", "\n", " dollars", ".", "\n#### " + number_text()])
    if rng.random() < 0.1:
        body = "#### " + ans + "\n" + filler(True)  # the mark clipped off by the 300-character window
    if rng.random() < 0.4:
        body = mutate(body)
    return {"data_source": "openai/gsm8k", "response": body, "ground_truth": gt}


MATH_GT = ["\\frac{1}{2}", "0.5", "3", "-3", "\\sqrt{2}", "2\\sqrt{3}", "(1,2)", "\\left( 1, 2 \\right)",
           "10\\%", "90^\\circ", "\\text{(A)}", "x^2+1", "\\dfrac{3}{4}", "3/4", "\\$5", "5 \\text{ cm}",
           "k = 3", ".5", "1,000", "\\infty", "\\pi", "\\frac12", "\\tfrac{1}{3}", "[-1, 4)", "\\{1,2\\}",
           "y = 2x + 1", "\\frac{\\sqrt{3}}{2}", "4\\sqrt2", "12", "-\\frac{7}{4}", "\\frac{a}{b}", "08/4",
           "100", "0.25", "x \\in [2, 5]", "\\frac{1}{0}", "\\mbox{Tuesday}", "-0/1", "2/3", "\\!1,\\!000"]


def math_variant(gt):
    v = rng.choice([gt, gt, gt.replace("\\frac", "\\dfrac"), gt.replace(" ", ""), gt.replace("\\left", ""),
                    gt + "^\\circ", gt + "\\%", "\\$" + gt, gt + " \\text{ units}", gt + ".", "x = " + gt,
                    rng.choice(MATH_GT), "\\left(" + gt + "\\right)", gt.replace("{", "").replace("}", ""),
                    "\\boxed{" + gt + "}", gt + "\\\\", gt + "\\sqrt", gt + "\\frac", gt + "\\text{ a}\\text{ b}"])
    return mutate(v) if rng.random() < 0.3 else v


def math():
    gt = rng.choice(MATH_GT)
    v = math_variant(gt)
    form = rng.random()
    if form < 0.6:
        tail = "The answer is $\\boxed{" + v + "}$."
    elif form < 0.7:
        tail = "so \\boxed " + v + "$ done"
    elif form < 0.78:
        tail = "\\fbox{" + v + "}"
    elif form < 0.85:
        tail = "\\boxed{" + rng.choice(MATH_GT) + "} then \\boxed{" + v + "}"
    elif form < 0.9:
        tail = "\\boxed{" + v  # unclosed
    elif form < 0.95:
        tail = "\\boxed{\\boxed{" + v + "}}"
    else:
        tail = v
    body = filler(rng.random() < 0.1) + tail
    if rng.random() < 0.15:
        body = mutate(body)
    source = rng.choice(["lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"])
    return {"data_source": source, "response": body, "ground_truth": gt}


DAPO_GT = MATH_GT + ["42", "1,234", "\\boxed{7}", "$\\frac{1}{2}$", "5 dollars", "an apple", "a 3",
                     "12 \\text{ inches}", "\\text{and}", "3 \\text{m}", "x=4", "2³", "١٢,٣", "\\overline{12}",
                     "\\textbf{9}", "1\n$2$ and $3$", "\\text{\n}8", "$1$\n$2$", "frac12", "sqrt2x"]


def dapo():
    gt = rng.choice(DAPO_GT)
    v = math_variant(gt) if rng.random() < 0.7 else rng.choice(DAPO_GT)
    key = rng.choice(["Answer:", "Answer: ", "answer :", "ANSWER:\n", "Answer:  \n", "ſAnswer:", "Anſwer: ",
                      "Answer:\u2003", "Final Answer: ", "Answer\n: "])
    body = filler(rng.random() < 0.15) + key + rng.choice(["", "$", "\\boxed{"]) + v + rng.choice(["", "$", "}", ".$", "\n"])
    if rng.random() < 0.2:
        body += "\nAnswer: " + rng.choice(DAPO_GT)
    if rng.random() < 0.05:
        body = key
    if rng.random() < 0.2:
        body = mutate(body)
    source = rng.choice(["math_dapo", "math", "math_dapo_reasoning", "aime2024", "aime_2025"])
    return {"data_source": source, "response": body, "ground_truth": gt}


def countdown():
    nums = [rng.randint(1, 99) for _ in range(rng.randint(2, 4))]
    ops = ["+", "-", "*", "/", "**", "//"]
    order = nums[:]
    rng.shuffle(order)
    expr = str(order[0])
    last = ""
    for n in order[1:]:
        # Never a**b**c: Python would compute a tower (42**66**4 takes a minute).
        last = rng.choice(ops[:4] if rng.random() < 0.8 or last == "**" else ops)
        expr += last + str(n)
    if rng.random() < 0.3:
        expr = "(" + expr + ")"
    try:
        target = eval(expr)
        target = int(target) if isinstance(target, (int, float)) and abs(target) < 1e9 and rng.random() < 0.7 else rng.randint(1, 200)
    except Exception:
        target = rng.randint(1, 200)
    if rng.random() < 0.3:
        expr = rng.choice([expr.replace(str(order[0]), "0" + str(order[0]), 1), expr + "+" + str(order[0]),
                           expr.replace(str(order[0]), str(order[0]) + ".0", 1), "()", "2(3)" + expr,
                           expr.replace("+", "\t+"), expr.replace("+", "\u00a0+"), expr.replace("1", "\u0661"),
                           expr + " = " + str(target), expr.replace("*", "x"), "(" + expr, expr + "/0",
                           expr.replace(str(order[0]), "." + str(order[0]), 1), expr.replace("+", "\x0b+")])
    tail = rng.choice(["<answer>" + expr + "</answer>", "<answer> " + expr + " </answer>",
                       "<answer>" + expr + "</answer>\n", "<answer>" + expr, expr,
                       "<answer>1+1</answer> <answer>" + expr + "</answer>",
                       "<answer>" + expr + "</answer>\nthat is it"])
    body = "<think>" + filler() + "</think>\n" + tail if rng.random() < 0.8 else tail
    if rng.random() < 0.15:
        body = mutate(body)
    return {"data_source": rng.choice(["countdown", "countdown3to4"]), "response": body,
            "ground_truth": {"target": target, "numbers": nums}}


def val_batch():
    # verl requires every reward_extra_info list to cover every sample: math_dapo's dict
    # rewards are not mixed with plain ones in one batch.
    if rng.random() < 0.4:
        sources = rng.sample(["math_dapo", "aime2024", "math"], rng.randint(1, 2))
    else:
        sources = rng.sample(["openai/gsm8k", "lighteval/MATH", "countdown"], rng.randint(1, 3))
    n = rng.choice([1, 2, 3, 4, 5, 8, 16])
    samples = []
    for p in range(rng.randint(1, 8)):
        src = rng.choice(sources)
        dapo = src in ("math_dapo", "aime2024", "math")
        kind = rng.random()
        for _ in range(n):
            if dapo:
                ok = rng.random() < 0.5
                score = 1.0 if ok else -1.0
                samples.append({"data_source": src, "uid": f"u{p}",
                                "vars": [["reward", score], ["score", score], ["acc", 1.0 if ok else 0.0]],
                                "pred": rng.choice(["1", "2", "\\frac{1}{2}", "[INVALID]"])})
            else:
                r = rng.choice([0.0, 1.0]) if kind < 0.6 else rng.choice([0.0, 0.10000000149011612, 1.0, rng.random()])
                samples.append({"data_source": src, "uid": f"u{p}", "vars": [["reward", r]]})
    return {"op": "val_metrics", "seed": rng.choice([42, 42, 0, 7, 2**32 - 1]), "samples": samples}


with open(out_path, "w", encoding="utf-8") as out:
    makers = [gsm8k, math, dapo, countdown]
    for i in range(count):
        req = makers[i % len(makers)]()
        req["op"] = "score"
        out.write(json.dumps(req, ensure_ascii=False) + "\n")
    for _ in range(max(4, count // 100)):
        out.write(json.dumps(val_batch(), ensure_ascii=False) + "\n")
