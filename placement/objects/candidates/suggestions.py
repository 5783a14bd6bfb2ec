"""What explain says when nothing fits: the constraints that, dropped
one at a time, would bring candidates back (found by the same search),
and per requested class the most a provider passing every other step
could give; with the request written back as the query wrote it.
"""
import copy

from placement.objects.candidates import reasons
from placement.objects.candidates import rules
from placement.objects import capacity_rules

# At most this many constraints are tried.
_MAX_SUGGESTIONS = 16


def describe(rg):
    """A request group as the query wrote it."""
    parts = []
    s = rg.suffix
    if rg.resources:
        parts.append('resources%s=%s' % (s, ','.join(
            '%s:%d' % kv for kv in rg.resources.items())))
    plain = sorted(n for any_of in rg.required if len(any_of) == 1
                   for n in any_of)
    plain += ['!' + n for n in sorted(rg.forbidden)]
    if plain:
        parts.append('required%s=%s' % (s, ','.join(plain)))
    for any_of in rg.required:
        if len(any_of) > 1:
            parts.append('required%s=%s' % (s, any_of_text(any_of)))
    for any_of in rg.member_of:
        parts.append('member_of%s=%s' % (s, any_of_text(any_of)))
    for agg in sorted(rg.forbidden_aggs):
        parts.append('member_of%s=!%s' % (s, agg))
    if rg.in_tree:
        parts.append('in_tree%s=%s' % (s, rg.in_tree))
    return '&'.join(parts)


def any_of_text(names):
    names = sorted(names)
    return names[0] if len(names) == 1 else 'in:' + ','.join(names)


def _drops(groups, wide):
    """(text, groups, wide) with one constraint removed, for each."""
    out = []

    def without(obj, attr, item=None, index=None):
        """A copy of ``obj`` without ``item`` of its set ``attr`` (or
        the ``index``-th of its list)."""
        obj = copy.copy(obj)
        old = getattr(obj, attr)
        setattr(obj, attr, old - {item} if index is None
                else old[:index] + old[index + 1:])
        return obj

    def variant(text, suffix=None, **how):
        g2 = dict(groups)
        w2 = wide
        if suffix is None:
            w2 = without(wide, **how)
        else:
            g2[suffix] = without(groups[suffix], **how)
        out.append((text, g2, w2))

    for s, rg in groups.items():
        for key, attr in (('required', 'required'),
                          ('member_of', 'member_of')):
            for i, any_of in enumerate(getattr(rg, attr)):
                variant('%s%s=%s' % (key, s, any_of_text(any_of)), s,
                        attr=attr, index=i)
        for key, attr in (('required', 'forbidden'),
                          ('member_of', 'forbidden_aggs')):
            for item in sorted(getattr(rg, attr)):
                variant('%s%s=!%s' % (key, s, item), s, attr=attr,
                        item=item)
        if rg.in_tree:
            g2 = dict(groups)
            g2[s] = copy.copy(rg)
            g2[s].in_tree = None
            out.append(('in_tree%s=%s' % (s, rg.in_tree), g2, wide))
    for name in sorted(wide.root_required):
        variant('root_required=%s' % name, attr='root_required', item=name)
    for name in sorted(wide.root_forbidden):
        variant('root_required=!%s' % name, attr='root_forbidden',
                item=name)
    if wide.group_policy == 'isolate':
        w2 = copy.copy(wide)
        w2.group_policy = 'none'
        out.append(('group_policy=isolate (with group_policy=none)',
                    groups, w2))
    for i, sub in enumerate(wide.same_subtrees):
        variant('same_subtree=%s' % ','.join(sorted(sub)),
                attr='same_subtrees', index=i)
    return out[:_MAX_SUGGESTIONS]


def suggestions(relaxed_used, groups, wide, egroups, judge, verdicts):
    """When nothing fits: what dropping one constraint would bring back,
    by the same search (``relaxed_used(groups, wide)``: the providers its
    answer uses); and, per requested class, the most any provider passing
    the group's other steps could give."""
    out = []
    for text, g2, w2 in _drops(groups, wide):
        used = relaxed_used(g2, w2)
        if used:
            out.append((len(used), '%d provider%s would fit without %s'
                        % (len(used), '' if len(used) == 1 else 's', text)))
    out.sort(key=lambda x: -x[0])
    lines = [text for _, text in out]
    rps = judge.view.rps
    for g in egroups:
        for rc, amount in g.resources:
            best = None
            for rp, verdict in verdicts[g.suffix].items():
                if verdict is None or verdict[0] not in ('capacity',
                                                         'units'):
                    continue
                rec = rps[rp]
                inv = judge.inventory(g, rec, rc)
                if inv is None or rules.serves(inv, amount):
                    continue
                if not judge.passes_but(g, rec, rc):
                    continue
                most = _most(inv)
                if most > 0 and (best is None or most > best[0]):
                    best = (most, rp)
            if best is not None:
                lines.append('%s: at most %s:%d would fit (%d asked), on '
                             '%s, which passes every other step'
                             % (reasons.group_name(g), rc, best[0], amount,
                                judge.view.label(best[1])))
    return lines


def _most(inv):
    """The largest amount one allocation could take now from ``inv``."""
    return capacity_rules.largest_amount(reasons.left(inv), inv.min_unit,
                                         inv.max_unit, inv.step_size)
