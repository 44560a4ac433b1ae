"""Writes burstgpt_synthetic.csv: a SYNTHETIC file in BurstGPT's CSV format.

The real BurstGPT CSVs (github.com/HPMLL/BurstGPT, data/BurstGPT_1.csv) are stored with Git
LFS and could not be fetched when the samples were made, so this file stands in for them:
made up, seeded, in exactly the published columns, with the shapes the BurstGPT paper
describes (bursty arrivals in seconds, long-tailed request lengths, two modes of response
length, a few failed requests with 0 response tokens). It is no real traffic; replace it
with a slice of the real file when you have one (the reader takes either).

    python workloads/make_burstgpt_synthetic.py   # rewrites the file, byte for byte
"""

from __future__ import annotations

import random
from pathlib import Path

ROWS = 2000


def main() -> None:
    rng = random.Random("tracediff burstgpt synthetic sample v1")
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    now = 5.0
    for _ in range(ROWS):
        # bursts: most gaps are short, some requests arrive in the same second
        now += 0.0 if rng.random() < 0.2 else round(rng.expovariate(1 / 3.0), 0)
        model = "GPT-4" if rng.random() < 0.25 else "ChatGPT"
        request = max(1, int(rng.paretovariate(1.2) * 60))
        request = min(request, 16000)
        if rng.random() < 0.03:
            response = 0  # a failed request, as BurstGPT_1.csv has them
        elif rng.random() < 0.5:
            response = max(1, int(rng.gauss(40, 15)))
        else:
            response = max(1, int(rng.gauss(300, 120)))
        log = "Conversation log" if rng.random() < 0.7 else "API log"
        lines.append(f"{int(now)},{model},{request},{response},{request + response},{log}")
    out = Path(__file__).with_name("burstgpt_synthetic.csv")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
