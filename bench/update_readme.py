"""Replaces the README's comparison block (between the compare:begin and compare:end
markers) with the tables of a shoal-compare report and its ops chart.

    python3 bench/update_readme.py docs/benchmarks/compare-N.md

(scripts/compare.sh --readme runs it.)
"""

import sys

BEGIN, END = "<!-- compare:begin", "<!-- compare:end -->"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    md_path = sys.argv[1]
    md = open(md_path).read()
    head = [
        line
        for line in md.splitlines()
        if line.startswith(
            (
                "- date:",
                "- commit:",
                "- machine:",
                "- load average",
                "- **the machine was busy**",
                "- command:",
                "- key order:",
                "- repeats:",
                "- phase lengths:",
            )
        )
    ]
    body = md[md.index("## Throughput") : md.index("## Notes")].strip()
    body = "\n".join("##" + line if line.startswith("## ") else line for line in body.splitlines())
    block = "\n".join(
        [
            "<!-- compare:begin (written by scripts/compare.sh --readme) -->",
            f"Latest run (full report with its notes: `{md_path}`):",
            "",
            *head,
            "",
            body,
            "",
            f"![ops/s per phase and system]({md_path[:-3]}-ops.png)",
            END,
        ]
    )
    readme = open("README.md").read()
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    open("README.md", "w").write(readme[:start] + block + readme[end:])
    print("README.md updated from", md_path)


if __name__ == "__main__":
    main()
