"""64-bit hashes of (topic, doc) string pairs, vectorised over Arrow string buffers.

Why our own: checking that no docno repeats within a topic of a 7-million-row run is the
slowest validation step. pyarrow's group_by on two string keys takes ~6 s and dictionary
encoding of 7M distinct docnos ~4 s on the benchmark machine; hashing the bytes 8 at a time in
numpy and sorting the 64-bit keys takes well under 1 s. A hash match is only a *candidate*
duplicate: callers confirm it exactly (collisions are then harmless, merely slower).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from evalstore import _kernels as pc

_MULT = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)


def _finalise(h: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, in place: spreads every input bit over the whole word."""
    with np.errstate(over="ignore"):
        h ^= h >> np.uint64(30)
        h *= _MIX
        h ^= h >> np.uint64(27)
    return h


# _BYTE_MASKS[k] keeps the low k bytes of a little-endian word (k = 0..8).
_VECTOR_BYTES = 256  # bytes of each string hashed in the vectorised passes; the rest one string at a time
_BYTE_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)


_BLOCK_ROWS = 1 << 14


def _word_hashes(words: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The strings' first :data:`_VECTOR_BYTES` bytes mixed in, 8 at a time (``words``: see
    :func:`_string_hashes`)."""
    h = lengths.astype(np.uint64) * _MULT
    for k in range(0, min(int(lengths.max()) if len(lengths) else 0, _VECTOR_BYTES), 8):
        # only the strings longer than k bytes take this pass: a string's hash mixes its own
        # words alone, whatever the longest string beside it, so that a docno hashes the same
        # in the run and in the qrels (a pass for every string made a run holding a docno longer
        # than every judged one miss all its judgments), in every chunk of a column and every block
        live = lengths > k
        rows: slice | np.ndarray = slice(None) if live.all() else np.flatnonzero(live)
        word = words[starts[rows] + k] & _BYTE_MASKS[np.minimum(lengths[rows] - k, 8)]
        mixed = h[rows]  # h itself when every string takes the pass (a slice's view)
        mixed ^= word
        mixed *= _MULT
        _finalise(mixed)
        if not isinstance(rows, slice):
            h[rows] = mixed
    return h


def _string_hashes(array: pa.Array) -> np.ndarray:
    n = len(array)
    offset_type = np.int64 if array.type == pa.large_string() else np.int32
    window = np.frombuffer(array.buffers()[1], dtype=offset_type)[array.offset : array.offset + n + 1]
    offsets: np.ndarray = window.astype(np.int64)
    data_buffer = array.buffers()[2]
    raw = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    padded = np.concatenate([raw, np.zeros(8, dtype=np.uint8)])
    # Overlapping unaligned 8-byte words: words[i] holds bytes i..i+7 (little-endian).
    words = np.ndarray(shape=(len(raw) + 1,), dtype="<u8", buffer=padded, strides=(1,))
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    h = np.empty(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        # a block of rows at a time: each pass's temporaries are a block's size, and one block's
        # memory serves the next; a whole column's would be new memory, each page a fault on first
        # touch (~7 MB for a 100k-row run: ~3 ms of an ordinary trec-eval)
        for first in range(0, n, _BLOCK_ROWS):
            block = slice(first, first + _BLOCK_ROWS)
            h[block] = _word_hashes(words, starts[block], lengths[block])
        # Each pass touches every string longer than k bytes, so one 4 MB docno made 500k passes
        # over the whole run (14-45 s inside the storing transaction). Past _VECTOR_BYTES, a string's
        # remaining bytes are hashed on their own: the cost is linear in the bytes, whatever one
        # field's length.
        long_rows = np.flatnonzero(lengths > _VECTOR_BYTES)
        if len(long_rows):
            import hashlib  # here only: OpenSSL's ~4 ms of start-up, for a field no real docno has

        for i in long_rows:
            start, stop = int(starts[i]) + _VECTOR_BYTES, int(offsets[i + 1])
            tail = hashlib.blake2b(raw[start:stop].tobytes(), digest_size=8).digest()
            h[i] ^= np.frombuffer(tail, dtype="<u8")[0]
            h[i] *= _MULT
        _finalise(h)
    return h


def doc_hashes(docs: pa.ChunkedArray) -> np.ndarray:
    """One uint64 per row identifying its docno (equal docnos, equal hashes)."""
    keys = np.empty(len(docs), dtype=np.uint64)
    start = 0
    for chunk in docs.chunks:
        keys[start : start + len(chunk)] = _string_hashes(chunk)
        start += len(chunk)
    return keys


def pair_hashes(topics: pa.ChunkedArray, docs: pa.ChunkedArray) -> np.ndarray:
    """One uint64 per row identifying the (topic, doc) pair (equal pairs, equal hashes)."""
    return with_topics(doc_hashes(docs), _topic_codes(topics))


def _topic_codes(topics: pa.ChunkedArray) -> np.ndarray:
    return pc.dictionary_encode(topics).combine_chunks().indices.to_numpy()


def with_topics(keys: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Docno hashes made (topic, doc) hashes, in place: ``codes`` are the topics as integers."""
    mixed = codes.astype(np.uint64)
    with np.errstate(over="ignore"):
        mixed += np.uint64(1)
        mixed *= _MIX
        keys ^= mixed
    del mixed
    return _finalise(keys)


def has_repeated_pair(
    topics: pa.ChunkedArray,
    docs: pa.ChunkedArray,
    codes: np.ndarray | None = None,
    doc_keys: np.ndarray | None = None,
) -> bool:
    """True when two rows *may* share a (topic, doc) pair; confirm exactly before reporting.
    ``codes``: the topics as integer codes, ``doc_keys`` the docnos' :func:`doc_hashes`, when the
    caller has them already (they are left as they are).

    A run lists each topic's rows together (nearly all do): then only docnos within a topic are
    compared, as rows of one (topics, longest topic) matrix sorted along its rows, a block of
    topics at a time. Sorting a thousand keys 7,000 times takes ~0.09 s where one sort of the 7M
    keys takes ~0.45 s."""
    codes = _topic_codes(topics) if codes is None else codes
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1]))) if len(codes) else codes
    if len(starts) == len(np.unique(codes[starts])):  # each topic's rows together
        within = _repeated_within_topics(docs, starts, doc_keys)
        if within is not None:
            return within
    keys = with_topics(doc_hashes(docs) if doc_keys is None else doc_keys.copy(), codes)
    keys.sort()
    return bool((keys[1:] == keys[:-1]).any())


# the docnos of about this many rows (whole topics) are hashed and compared at a time: a 7M-row
# run's 56 MB of hashes at once were a sixth of the memory that evaluating it takes
HASH_BLOCK_ROWS = 1 << 20


def _repeated_within_topics(docs: pa.ChunkedArray, starts: np.ndarray, doc_keys: np.ndarray | None) -> bool | None:
    """Whether a docno repeats within one of the topics whose rows begin at ``starts``, hashed a
    block of whole topics at a time (or their ``doc_keys`` copied); None as
    :func:`_repeated_within_groups`."""
    cuts = np.append(starts[np.flatnonzero(np.diff(starts // HASH_BLOCK_ROWS, prepend=-1))], len(docs))
    for low, high in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
        first, last = np.searchsorted(starts, [low, high])
        keys = doc_hashes(docs.slice(low, high - low)) if doc_keys is None else doc_keys[low:high].copy()
        within = _repeated_within_groups(keys, starts[first:last] - low)
        if within is None or within:
            return within
    return False


def _repeated_within_groups(keys: np.ndarray, starts: np.ndarray) -> bool | None:
    """Whether a key repeats within one of the runs of rows beginning at ``starts``; None when
    padding them to one length would take more than twice the memory of the keys."""
    n = len(keys)
    lengths = np.diff(np.append(starts, n))
    width = int(lengths.max()) if n else 0
    if n == 0 or width < 2:
        return False
    if (lengths == width).all():
        matrix = keys.reshape(len(starts), width)
    elif len(starts) * width <= 2 * n:
        # the padding: a different key in each column, so padding never equals padding (one that
        # equals a real key is a candidate, confirmed exactly as any hash match)
        matrix = np.empty((len(starts), width), dtype=np.uint64)
        matrix[:] = np.uint64(2**64 - 1) - np.arange(width, dtype=np.uint64)
        group = np.repeat(np.arange(len(starts)), lengths)
        matrix[group, np.arange(n) - starts[group]] = keys
    else:
        return None
    matrix.sort(axis=1)
    return bool((matrix[:, 1:] == matrix[:, :-1]).any())


class KeyIndex:
    """Where each of some 64-bit keys is, for looking keys up among them many times: an
    open-addressing table with linear probing, built and probed by whole arrays in numpy.

    Why our own: pyarrow's ``index_in`` builds a hash table of its value set at every call
    (~3 ms for robust03's 128k judgments, once a run of a campaign, where a look-up here takes
    ~1 ms), and no library that `trec-eval` loads keeps one between calls (pandas' index engine
    would, at ~0.1 s of import). A key given more than once is found at one of its places;
    :attr:`distinct` says whether that happened."""

    def __init__(self, keys: np.ndarray) -> None:
        self.keys = keys
        # a power of two at least four times the keys: with the keys' bits well mixed (the
        # splitmix finaliser), nearly every probe ends at the first or second slot
        bits = max(int(len(keys)).bit_length() + 2, 4)
        self._shift = np.uint64(64 - bits)
        self._mask = (1 << bits) - 1
        self._slots = np.full(1 << bits, -1, dtype=np.int64)
        pending = np.arange(len(keys), dtype=np.int64)
        slot = self._home(keys)
        self._probes = 0
        self.distinct = True
        while len(pending):
            self._probes += 1
            free = self._slots[slot] == -1
            # keys sharing a free slot: one of them takes it (numpy keeps one of the writes), the
            # others go on to the next slot, as a look-up of theirs will
            self._slots[slot[free]] = pending[free]
            holder = self._slots[slot]
            moving = holder != pending
            # a key equal to one placed before it passes that one's slot on its way (equal keys
            # share their home, and no slot is emptied): there it is seen to be given twice
            if self.distinct and (keys[holder[moving]] == keys[pending[moving]]).any():
                self.distinct = False
            pending, slot = pending[moving], (slot[moving] + 1) & self._mask

    @classmethod
    def restored(cls, keys: np.ndarray, slots: np.ndarray, probes: int, distinct: bool) -> KeyIndex:
        """The index whose :attr:`keys`, :attr:`slots`, :attr:`probes` and :attr:`distinct` these
        were (kept on disk with the qrels they index: evalstore.io.parsed_cache)."""
        index = cls.__new__(cls)
        index.keys, index._slots, index._probes, index.distinct = keys, slots, probes, distinct
        bits = len(slots).bit_length() - 1
        index._shift, index._mask = np.uint64(64 - bits), (1 << bits) - 1
        return index

    @property
    def slots(self) -> np.ndarray:
        return self._slots

    @property
    def probes(self) -> int:
        return self._probes

    def _home(self, keys: np.ndarray) -> np.ndarray:
        return (keys >> self._shift).astype(np.int64)  # the top bits: the finaliser mixes them best

    def find(self, queries: np.ndarray) -> np.ndarray:
        """Each query's place among the keys, or -1."""
        if not len(self.keys):
            return np.full(len(queries), -1, dtype=np.int64)
        slot = self._home(queries)
        at = self._slots[slot]
        # the first probe over every query at once, without boolean selections (each costs more
        # than the probe itself); an empty slot's -1 takes a key that the mask then disregards
        held = at >= 0
        hit = held & (self.keys.take(at, mode="clip") == queries)
        found = np.where(hit, at, -1)
        asking = np.flatnonzero(held & ~hit)
        slot = (slot[asking] + 1) & self._mask
        # the few left, a slot further each time: no key lies more than self._probes slots away
        for _ in range(self._probes - 1):
            if not len(asking):
                break
            at = self._slots[slot]
            held = at >= 0
            hit = held & (self.keys.take(at, mode="clip") == queries[asking])
            found[asking[hit]] = at[hit]
            going = held & ~hit
            asking, slot = asking[going], (slot[going] + 1) & self._mask
        return found
