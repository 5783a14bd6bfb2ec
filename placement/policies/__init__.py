"""Default policy rules: upstream's names, check strings and scope types."""
import itertools

from placement.policies import base


def list_rules():
    return list(itertools.chain(base.list_rules()))
