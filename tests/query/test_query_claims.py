"""Claim extraction: every group of a subquery goes to the model as one batch, and a failed batch
costs only the groups whose own call fails."""

from __future__ import annotations

from dataclasses import dataclass, field

from support.fakes import FakeLLM, TinyIndex

from lazygraph.errors import LLMError
from lazygraph.query.search.lazy.claims import MapGroup, extract_claims, grounded
from lazygraph.settings import QuerySettings

TEXTS = ["The mill opened in 1820.", "Ada Marsh ran the mill.", "The river froze in 1830."]


@dataclass
class BatchRecordingLLM(FakeLLM):
    """Records the size of every batch; refuses batches larger than ``max_batch`` as a whole."""

    max_batch: int = 100
    fail_on: str = "\u0000"  # a single call whose prompt holds this text fails
    batch_sizes: list[int] = field(default_factory=list)

    def _chat_batch(self, batch, *, max_tokens, temperature, json_schema):
        self.batch_sizes.append(len(batch))
        if len(batch) > self.max_batch:
            raise LLMError("the server refused the batch")
        if any(self.fail_on in m[-1]["content"] for m in batch):
            raise LLMError("the server refused the request")
        return [
            self._chat(m, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema)
            for m in batch
        ]


def _groups() -> list[MapGroup]:
    return [MapGroup(0, [0]), MapGroup(1, [1]), MapGroup(2, [2])]


def test_all_groups_go_to_the_model_as_one_batch() -> None:
    snap = TinyIndex(texts=TEXTS).snapshot()
    llm = BatchRecordingLLM()
    claims = extract_claims(snap, "Who ran the mill?", 0, _groups(), llm, QuerySettings())
    assert llm.batch_sizes == [3]
    assert sorted(c.chunks[0] for c in claims if not c.extracted) == [0, 1, 2]


def test_a_refused_batch_is_retried_call_by_call_and_a_failed_call_costs_only_its_group() -> None:
    snap = TinyIndex(texts=TEXTS).snapshot()
    llm = BatchRecordingLLM(max_batch=1, fail_on="froze")
    claims = extract_claims(snap, "Who ran the mill?", 0, _groups(), llm, QuerySettings())
    assert llm.batch_sizes == [3, 1, 1, 1]
    by_model = sorted(c.chunks[0] for c in claims if not c.extracted)
    assert by_model == [0, 1]  # the third group's call failed ...
    assert [c.chunks for c in claims if c.extracted] == [[2]]  # ... and its chunk is quoted instead


def test_a_claim_stands_only_on_what_its_passage_says() -> None:
    yoko = (
        "Yoko Ono\nYoko Ono (born February 18, 1933) is a Japanese multimedia artist, singer and songwriter. "
        "She is noted for being the second wife and widow of singer-songwriter John Lennon of the Beatles."
    )
    song = '"Death of Samantha" is a song written by Yoko Ono, covered by Boy George and Porcupine Tree.'
    assert grounded("Yoko Ono is noted for being the second wife of John Lennon.", yoko)
    assert grounded("Death of Samantha was written by Yoko Ono.", song)
    # the question written back with a name of the passage in the answer's place
    assert not grounded("The writer of the song 'Death of Samantha' was the second wife of Yoko Ono", yoko)
    assert not grounded("Yoko Ono was the second wife of Porcupine Tree", song)  # words the passage lacks
    # hyphenated names are split as the passage is
    eunji = "Jung Eun-ji (born 1993) is a South Korean singer, songwriter, actress and voice actress."
    assert grounded("Jung Eun-ji is a South Korean singer and actress.", eunji)
    # a lost negation: the sentence it restates says the opposite
    review = "The review did not recommend refusal. It recommended a smaller first phase of two turbines."
    assert not grounded("The review recommended refusal.", review)
    assert grounded("The review recommended a smaller first phase of two turbines.", review)
