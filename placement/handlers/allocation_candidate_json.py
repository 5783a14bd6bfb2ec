"""The JSON of a GET /allocation_candidates answer: allocation_requests
and provider_summaries, shaped for the microversion asked, written as
bytes from parts serialised once (a wide request renders tens of
thousands of candidates over a handful of providers).

The trees' summaries at the microversions nova asks for are also
rendered ahead into the node's snapshot file (NODE_KEY, registered with
the engine below); the objects know no JSON.
"""
import hashlib
import itertools
import operator
import types

import orjson

from placement.objects.candidates import engine
from placement.objects.candidates import model

DICT_ALLOCATIONS = (1, 12)
TRAITS_IN_SUMMARIES = (1, 17)
ALL_RESOURCES_IN_SUMMARIES = (1, 27)
MAPPINGS = (1, 34)


def allocation_requests(cands, providers, want, isolate):
    """The allocation_requests list: a list of dicts before 1.12, later
    the JSON array itself (bytes), from parts built once per provider and
    group (see _Renderer)."""
    if not want.matches(DICT_ALLOCATIONS):
        return [{'allocations': [
            {'resource_provider': {'uuid': providers[rp].uuid},
             'resources': res}
            for rp, res in cand.allocations.items()]} for cand in cands]
    with_mappings = want.matches(MAPPINGS)
    sole = [cand.sole for cand in cands]
    if not cands:
        array = b'[]'
    elif None not in sole:
        array = _sole_provider_requests(cands[0].groups[0], sole, providers,
                                        with_mappings)
    else:
        array = _Renderer(cands, providers, with_mappings, isolate).array()
    return array


def _sole_provider_requests(group, sole, providers, with_mappings):
    """The JSON array (bytes) of candidates that are each one provider
    serving the one group (a flat world's, a host's compute node): the
    text between one uuid and the next is the same throughout, so the
    array is one join of the uuids, no operation per candidate."""
    dumps = orjson.dumps
    uuids = _quoted_list([providers[rp].uuid for rp in sole])
    head = b'{"allocations":{'
    allocation = b':{"resources":%s}}' % dumps(group.amounts)
    if not with_mappings:
        between = [allocation + b'},' + head]
        tail = allocation + b'}'
    else:
        mapped = b',"mappings":{%s:[' % dumps(group.suffix)
        between = [allocation + mapped, b']}},' + head]
        tail = b']}}'
    # Per candidate: its uuid, between[0] (and again, between[1]).
    step = 2 * len(between)
    pieces = [None] * (step * len(uuids))
    for at, text in enumerate(between):
        pieces[2 * at::step] = uuids
        pieces[2 * at + 1::step] = [text] * len(uuids)
    pieces[-1] = tail
    return b''.join([b'[', head, *pieces, b']'])


# What a uuid may hold and JSON needs no escape for: printable ASCII
# but the quote and the backslash.
_PLAIN = bytes(c for c in range(0x20, 0x7f) if c not in b'"\\')


def _quoted_list(uuids):
    """The JSON values of ``uuids`` (None: null). Provider uuids are
    plain ASCII (the API takes UUIDs only): quoting them is then a
    format, cheaper than a serialiser call each (whose small outputs,
    kept alive by the thousand, also cost it allocations). All of them
    are checked, quoted and encoded at once, then split apart (NUL
    separates them: it is not plain)."""
    present = [u for u in uuids if u is not None]
    text = ''.join(present)
    if not text.isascii() or text.encode().translate(None, _PLAIN):
        return [orjson.dumps(u) for u in uuids]
    if not present:
        return [b'null'] * len(uuids)
    quoted = ('"%s"' % '"\0"'.join(present)).encode().split(b'\0')
    if len(present) < len(uuids):
        each = iter(quoted)
        quoted = [b'null' if u is None else next(each) for u in uuids]
    return quoted


def _quoted(uuid_of):
    """{rp: the JSON string of its uuid} (see _quoted_list)."""
    return dict(zip(uuid_of, _quoted_list(list(uuid_of.values()))))


class _Renderer:
    """Render, as JSON, candidates from their picks.

    Candidates of the search's batches have group lists of their own, but
    alike position by position (see model.Candidate), which is all
    rendering reads. What each group's pick renders to is serialised once
    per distinct pick (a wide request renders tens of thousands of
    candidates over a handful of providers): its allocations entry
    (``"uuid":{"resources":{...}}``, one per provider) and its mappings
    entry (``"suffix":["uuid", ...]``). When no two groups of a candidate
    can draw on one provider, the candidates are then a single join of
    those parts, column by column, at C speed; otherwise each candidate
    is joined on its own, and where two groups did draw on one provider
    its amounts are summed."""

    def __init__(self, cands, providers, with_mappings, isolate):
        self.groups = cands[0].groups
        self.picks = list(map(operator.attrgetter('picks'), cands))
        self.with_mappings = with_mappings
        columns = [set(map(operator.itemgetter(pos), self.picks))
                   for pos in range(len(self.groups))]
        # Per group, the providers its picks use.
        per_group = [column if group.same_provider
                     else set(itertools.chain.from_iterable(column))
                     for group, column in zip(self.groups, columns)]
        self.may_share = self._may_share(self.groups, per_group, isolate)
        self.quoted = _quoted({rp: providers[rp].uuid
                               for rp in set().union(*per_group)})
        self.resources = model.OnFirstUse(
            lambda items: b'{"resources":%s}' % orjson.dumps(dict(items)))
        # Per group: {pick: its allocations entry, b'' if none}, and
        # {pick: its mappings entry}.
        self.allocs = []
        self.maps = []
        quoted = self.quoted
        for group, column in zip(self.groups, columns):
            key = orjson.dumps(group.suffix)
            if group.same_provider:
                res = b':' + self.resources[tuple(group.amounts.items())]
                self.allocs.append({rp: quoted[rp] + res if group.resources
                                    else b'' for rp in column})
                self.maps.append({rp: b'%s:[%s]' % (key, quoted[rp])
                                  for rp in column})
            else:
                # One provider per class (the usual pick): its entries
                # are the providers' quoted uuids, each followed by its
                # class's part; otherwise amounts are summed per provider.
                tails = [b':' + self.resources[((rc, amount),)]
                         for rc, amount in group.resources]
                whole = b':' + self.resources[tuple(group.amounts.items())]
                width = len(tails)
                allocs = {}
                maps = {}
                for pick in column:
                    first = pick[0]
                    if pick.count(first) == width:
                        # One provider serves every class (the usual).
                        allocs[pick] = quoted[first] + whole
                        maps[pick] = b'%s:[%s]' % (key, quoted[first])
                        continue
                    if len(set(pick)) == width:
                        allocs[pick] = b','.join(map(
                            bytes.__add__, map(quoted.__getitem__, pick),
                            tails))
                    else:
                        allocs[pick] = self._alloc_entry(group, pick)
                    maps[pick] = b'%s:[%s]' % (key, b','.join(
                        map(quoted.__getitem__, dict.fromkeys(pick))))
                self.allocs.append(allocs)
                self.maps.append(maps)

    @staticmethod
    def _may_share(groups, per_group, isolate):
        """Whether two groups that allocate picked one provider, in some
        candidates (numbered groups under isolate never do in one)."""
        seen = []
        for g, mine in zip(groups, per_group):
            if g.same_provider and not g.resources:
                continue
            for other, theirs in seen:
                if isolate and g.same_provider and other.same_provider:
                    continue
                if not theirs.isdisjoint(mine):
                    return True
            seen.append((g, mine))
        return False

    @staticmethod
    def _per_provider(group, pick):
        """{rp: {rc: amount}} of one group's pick."""
        if group.same_provider:
            return {pick: group.amounts} if group.resources else {}
        per_rp = {}
        for rp, (rc, amount) in zip(pick, group.resources):
            res = per_rp.setdefault(rp, {})
            res[rc] = res.get(rc, 0) + amount
        return per_rp

    def _alloc_entry(self, group, pick):
        return b','.join(
            b'%s:%s' % (self.quoted[rp], self.resources[tuple(res.items())])
            for rp, res in self._per_provider(group, pick).items())

    def array(self):
        """The candidates, as a JSON array (bytes)."""
        if self.may_share:
            return b'[%s]' % b','.join(map(self._one, self.picks))
        # Column by column: each group's entries for all candidates, with
        # commas between groups; then one join over the candidates' pieces,
        # interleaved by zip (a 40,320 candidates answer is 37 MB: this is
        # its only copy before the response's).
        allocating = [pos for pos, group in enumerate(self.groups)
                      if not group.same_provider or group.resources]
        comma = itertools.repeat(b',')
        opening = b'{"allocations":{'
        pieces = [itertools.chain([b'[' + opening],
                                  itertools.repeat(b',' + opening))]
        pieces.extend(self._columns(self.allocs, allocating, comma))
        if self.with_mappings:
            pieces.append(itertools.repeat(b'},"mappings":{'))
            pieces.extend(self._columns(self.maps, range(len(self.groups)),
                                        comma))
        pieces.append(itertools.repeat(b'}}'))
        return b''.join(itertools.chain(
            itertools.chain.from_iterable(zip(*pieces)), [b']']))

    def _columns(self, entries, positions, comma):
        """Iterables of the candidates' entries for the groups at
        ``positions``, commas between them."""
        out = []
        for pos in positions:
            if out:
                out.append(comma)
            out.append(map(entries[pos].__getitem__,
                           map(operator.itemgetter(pos), self.picks)))
        return out

    def _one(self, picks):
        """One candidate, which may use a provider for two groups."""
        rps = []
        for group, pick in zip(self.groups, picks):
            if not group.same_provider:
                rps.extend(dict.fromkeys(pick))
            elif group.resources:
                rps.append(pick)
        if len(set(rps)) < len(rps):
            allocations = self._summed(picks)
        else:
            allocations = b','.join(filter(None, map(
                operator.getitem, self.allocs, picks)))
        if not self.with_mappings:
            return b'{"allocations":{%s}}' % allocations
        return b'{"allocations":{%s},"mappings":{%s}}' % (
            allocations, b','.join(map(operator.getitem, self.maps,
                                       picks)))

    def _summed(self, picks):
        """Allocations where groups share a provider: amounts added up."""
        total = {}
        for group, pick in zip(self.groups, picks):
            for rp, res in self._per_provider(group, pick).items():
                have = total.setdefault(rp, {})
                for rc, amount in res.items():
                    have[rc] = have.get(rc, 0) + amount
        return b','.join(
            b'%s:%s' % (self.quoted[rp], self.resources[tuple(res.items())])
            for rp, res in total.items())


def summaries_shape(groups, want):
    """(classes shown: None for all, else a frozenset of names; traits
    shown), what a Part renders to (see _part) in this request's
    summaries."""
    if want.matches(ALL_RESOURCES_IN_SUMMARIES):
        requested = None
    else:
        requested = set()
        for g in groups.values():
            requested.update(g.resources)
        requested = frozenset(requested)
    return requested, want.matches(TRAITS_IN_SUMMARIES)


def provider_summaries(cands, providers, shown, whole_trees):
    """Summaries of every provider in the trees the candidates allocate
    from (only the providers they allocate from, for old microversions
    on nested worlds), as the JSON object itself (bytes); ``shown``:
    (summaries_shape, whether parent and root uuids are shown).

    A tree's summaries are rendered once per shape (microversion, classes
    shown) and kept on its model.Tree, which the world keeps until the
    tree changes (a thousand trees, request after request); what alike
    providers share (resources and traits) once per model.Part; and the
    rest is one format per tree (see _tree_entries). Trees the node
    rendered already come as runs (``providers.rendered``, see
    NODE_SHAPE), each copied as it is but for its last comma.
    """
    shape, nested = key = shown
    parts = model.OnFirstUse(lambda part: _part(part, shape))
    if whole_trees:
        # (first root, its entries), each run or tree.
        entries = [(first, run[:-1]) for first, run in providers.rendered]
        by_table = {}
        # The world's answer names the trees it did not render; the SQL
        # engine's, none: those of the providers allocated from.
        roots = providers.trees
        if roots is None:
            roots = {providers[rp].root_id
                     for rp in model.allocated_providers(cands)}
        for root in roots:
            tree = providers.tree(root)
            cached = tree.summary
            if cached is None or cached[0] != key:
                cached = tree.summary = (key, _tree_entries(
                    tree, _renderings(tree, parts, by_table), nested))
            entries.append((root, cached[1]))
        entries.sort(key=_FIRST)
        entries = [entry for _, entry in entries]
    else:
        provs = [providers[rp]
                 for rp in sorted(model.allocated_providers(cands))]
        entries = [b'%s:{%s}' % (quoted, parts[prov])
                   for prov, quoted in zip(provs, _quoted_list(
                       [p.uuid for p in provs]))]
    if not entries:
        return b'{}'
    # Megabytes are copied once: the commas and braces go between.
    pieces = [b','] * (2 * len(entries) + 1)
    pieces[1::2] = entries
    pieces[0], pieces[-1] = b'{', b'}'
    return b''.join(pieces)


_FIRST = operator.itemgetter(0)


# The summaries every tree has at the microversions nova asks for (1.29
# and later: every class, traits, parent and root): rendered once per
# node, with its snapshot of the world (engine.render_trees_with), and
# copied into the answers from there -- a random sample's thousand trees
# are new ones each time. Their key names the code that renders them, so
# that a process of another version never copies what it would not
# render (a rolling upgrade of a node's processes).
NODE_SHAPE = ((None, True), True)


def _render_whole_trees(trees):
    """The summaries of ``trees`` (model.Tree, or None: none) at
    NODE_SHAPE, one bytes each, each followed by a comma."""
    shape, nested = NODE_SHAPE
    parts = model.OnFirstUse(lambda part: _part(part, shape))
    by_table = {}
    for tree in trees:
        # A comma after each: trees one after another are then their
        # entries together (a run: see provider_summaries).
        yield b'' if tree is None else _tree_entries(
            tree, _renderings(tree, parts, by_table), nested) + b','


def _renderings(tree, parts, by_table):
    """What renders ``tree.parts`` (see model.Tree): ``parts`` (model.Part
    -> its rendering) when they are Parts, else a map of their keys, one
    per table (``by_table``, by id: trees of one answer share one)."""
    table = tree.table
    if table is None:
        return parts
    found = by_table.get(id(table))
    if found is None:
        found = by_table[id(table)] = model.OnFirstUse(
            lambda key: parts[table[key]])
    return found


def _tree_entries(tree, parts, nested):
    """The ``"uuid":{...}`` entries of ``tree``'s providers, joined:
    one format, its template made once per model.Layout (trees alike
    share one) and kept there; ``parts``: what each of tree.parts renders
    to (_renderings). Plain uuids (the usual) fill the template's quotes
    as they are."""
    made = tree.layout.summary
    if made is None or made[0] != nested:
        made = tree.layout.summary = (nested, _templates(tree.layout,
                                                         nested))
    quoting, quoted, pick = made[1]
    uuids = tree.uuids
    if tree.canonical:
        plain = True
    elif None not in uuids:
        raw = b''.join(uuids)
        plain = raw.isascii() and not raw.translate(None, _PLAIN)
    else:
        plain = False
    if plain:
        values = list(uuids)
        template = quoting
    else:
        values = _quoted_list([u if u is None else u.decode()
                               for u in uuids])
        template = quoted
    values += map(parts.__getitem__, tree.parts)
    return template % pick(values)


def _templates(layout, nested):
    """(template quoting the uuids, template of uuids quoted already,
    what picks the values filling them from a tree's uuids then parts:
    an operator.itemgetter, a tuple in one C call)."""
    def template(uuid):
        pieces = []
        for parent in layout.parents:
            if not nested:
                pieces.append(b'%s:{%%s}' % uuid)
            elif parent is None:
                pieces.append(b'%s:{%%s,"parent_provider_uuid":null,'
                              b'"root_provider_uuid":%s}' % (uuid, uuid))
            else:
                pieces.append(b'%s:{%%s,"parent_provider_uuid":%s,'
                              b'"root_provider_uuid":%s}'
                              % (uuid, uuid, uuid))
        return b','.join(pieces)

    order = []
    size = layout.size
    for i, parent in enumerate(layout.parents):
        order += (i, size + i)
        if nested:
            if parent is not None:
                order.append(parent)
            order.append(layout.root)
    # At least two values (a uuid and its part): itemgetter gives a tuple.
    return template(b'"%s"'), template(b'%s'), operator.itemgetter(*order)


def _part(part, shape):
    """What a model.Part renders to in a summary: ``"resources":{...}``
    and, from 1.17, ``,"traits":[...]`` (kept on it per shape)."""
    cached = part.summary
    if cached is not None and cached[0] == shape:
        return cached[1]
    requested, with_traits = shape
    resources = {rc: {'capacity': room.capacity, 'used': room.used}
                 for rc, room in part.inventory.items()
                 if requested is None or rc in requested}
    out = b'"resources":' + orjson.dumps(resources)
    if with_traits:
        # In trait id order, see model.Traits.
        out += b',"traits":' + orjson.dumps(part.traits.listed)
    part.summary = (shape, out)
    return out


def _code_of(*functions):
    """A digest of ``functions``' code (and orjson's version), the same in
    every process running it (marshal's output is not: it depends on
    reference counts)."""
    digest = hashlib.sha256(orjson.__version__.encode())

    def add(code):
        digest.update(code.co_code)
        digest.update(repr(code.co_names).encode())
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                add(const)
            elif isinstance(const, frozenset):
                # Its order varies with the hash seed.
                digest.update(repr(sorted(map(repr, const))).encode())
            else:
                digest.update(repr(const).encode())

    for function in functions:
        add(function.__code__)
    return digest.hexdigest()


NODE_KEY = ('provider summaries', NODE_SHAPE, _code_of(
    _render_whole_trees, _renderings, _tree_entries, _templates, _part,
    _quoted_list, _quoted))
engine.render_trees_with(NODE_KEY, _render_whole_trees)
