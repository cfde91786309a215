"""Writes a large multi-document YAML stream for the offline benchmark: copies of the corpus
documents (training and non-training mixed), each renamed so every document is distinct.
usage: gen_manifests.py CORPUS_DIR OUT_FILE COUNT"""
import os
import sys


def documents(corpus):
    docs = []
    for root, _, files in sorted(os.walk(corpus)):
        for f in sorted(files):
            if f.endswith(".md"):
                continue
            text = open(os.path.join(root, f), encoding="utf-8").read()
            for d in text.split("\n---"):
                d = d.strip("\n")
                if d.strip() and not d.lstrip().startswith("#") or "kind:" in d:
                    if "kind:" in d:
                        docs.append(d + "\n")
    return docs


def main():
    corpus, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    docs = documents(corpus)
    with open(out, "w", encoding="utf-8") as f:
        for i in range(count):
            d = docs[i % len(docs)]
            f.write(f"---\n# copy {i}\n{d}")
    print(f"{count} documents from {len(docs)} corpus documents -> {out}")


main()
