"""search._random_order: the lazily shuffled order a randomized walk
takes the roots in (its first ``limit`` candidates are a uniform sample
only if every order is as likely)."""
import collections
import itertools
import math
import random

from placement.objects.candidates import search


def test_each_item_comes_once():
    for n in (0, 1, 2, 7, 100, 1000):
        items = list(range(0, 3 * n, 3))
        got = list(search._random_order(items))
        assert sorted(got) == items


def test_every_order_as_likely():
    """Five items: the draws with replacement give the first three, the
    shuffle the rest. Over 12,000 orders each of the 120 comes about 100
    times: the chi-square statistic (119 degrees of freedom, sd 15.4)
    within five of its standard deviations of its mean."""
    state = random.getstate()
    random.seed(20261127)
    try:
        counts = collections.Counter(
            tuple(search._random_order('abcde')) for _ in range(12000))
    finally:
        random.setstate(state)
    assert set(counts) == set(itertools.permutations('abcde'))
    expected = 12000 / 120
    stat = sum((n - expected) ** 2 / expected for n in counts.values())
    assert abs(stat - 119) < 5 * math.sqrt(2 * 119), stat


def test_taking_a_few_draws_a_few(monkeypatch):
    """Taking ten of a million items draws about ten, not a million."""
    items = range(1000000)
    drawn = []
    real = random.choices

    def counting(population, k):
        drawn.append(k)
        return real(population, k=k)

    monkeypatch.setattr(random, 'choices', counting)
    first = list(itertools.islice(search._random_order(items), 10))
    assert len(set(first)) == 10
    assert sum(drawn) < 100
