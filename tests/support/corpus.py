"""A dozen small documents and a JSON Lines writer, shared by the indexing end-to-end tests."""

from __future__ import annotations

import json
from pathlib import Path

DOCS = [
    (
        "apollo",
        "Apollo program",
        "The Apollo program was the third human spaceflight program of NASA. "
        "Neil Armstrong and Buzz Aldrin walked on the Moon in July 1969 during Apollo 11.",
    ),
    (
        "saturn",
        "Saturn V",
        "The Saturn V rocket launched the Apollo missions. Wernher von Braun led the "
        "engineers who designed the Saturn V at the Marshall Space Flight Center for NASA.",
    ),
    (
        "moon",
        "Moon",
        "The Moon is the only natural satellite of Earth. Neil Armstrong was the first person "
        "to walk on the Moon; Buzz Aldrin followed him.",
    ),
    (
        "nasa",
        "NASA",
        "NASA is the space agency of the United States. NASA ran the Apollo program and "
        "later the Space Shuttle program from the Kennedy Space Center.",
    ),
    (
        "shuttle",
        "Space Shuttle",
        "The Space Shuttle was a reusable spacecraft operated by NASA. "
        "Shuttle missions launched from the Kennedy Space Center in Florida.",
    ),
    (
        "mars",
        "Mars",
        "Mars is the fourth planet from the Sun. NASA rovers such as Curiosity explore Mars "
        "and send images of Martian rocks back to Earth.",
    ),
    (
        "curiosity",
        "Curiosity rover",
        "Curiosity is a car-sized rover exploring Gale crater on Mars. "
        "NASA landed the Curiosity rover in 2012 with a sky crane.",
    ),
    (
        "beethoven",
        "Ludwig van Beethoven",
        "Ludwig van Beethoven was a German composer. Beethoven wrote nine "
        "symphonies and many piano sonatas in Vienna.",
    ),
    (
        "mozart",
        "Wolfgang Amadeus Mozart",
        "Wolfgang Amadeus Mozart was a composer of the classical period. "
        "Mozart wrote symphonies, operas and piano concertos in Vienna and Salzburg.",
    ),
    (
        "vienna",
        "Vienna",
        "Vienna is the capital of Austria. Composers such as Mozart and Beethoven worked "
        "in Vienna, and its concert halls still play their symphonies.",
    ),
    (
        "piano",
        "Piano",
        "The piano is a keyboard instrument. Composers like Mozart and Beethoven wrote piano "
        "sonatas and piano concertos for it.",
    ),
    (
        "salzburg",
        "Salzburg",
        "Salzburg is a city in Austria and the birthplace of Mozart. The Salzburg "
        "Festival presents operas and concerts every summer.",
    ),
]


def write_jsonl(path: Path, docs: list[tuple[str, str, str]], extra: list[bytes] = ()) -> Path:
    with path.open("wb") as out:
        for doc_id, title, text in docs:
            out.write(json.dumps({"doc_id": doc_id, "title": title, "text": text}).encode() + b"\n")
        for line in extra:
            out.write(line + b"\n")
    return path
