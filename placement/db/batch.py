"""Several small SELECTs in one round trip.

A write reads a handful of short things before it writes (the owners'
ids, the consumers, their current allocations); each statement on its own
costs a round trip and SQLAlchemy's per-execution work. ``select_many``
sends them as one ``UNION ALL`` and hands each back its own rows.

Building the union (a typed NULL per foreign column of every part) and a
row class per part costs more Python than the round trip it saves, so a
caller on a hot path builds a ``Many`` once, with bound parameters
(``sa.bindparam(..., expanding=True)`` for lists), and runs it with each
request's values.
"""
import collections

import sqlalchemy as sa


class Many:
    """The named SELECTs (each without ORDER BY or LIMIT) as one
    statement, built once; ``run`` executes it.

    Every select keeps its own columns: in one select's rows the others'
    columns are NULL, cast to their types (PostgreSQL resolves the column
    types of a UNION pairwise, and two bare NULLs would become text).
    """

    def __init__(self, **selects):
        self.names = names = list(selects)
        columns = []
        self.spans = spans = []
        for name in names:
            own = list(selects[name].selected_columns)
            spans.append((len(columns), len(own)))
            columns.extend(own)
        parts = []
        for index, name in enumerate(names):
            start, width = spans[index]
            own = list(selects[name].selected_columns)
            exprs = [sa.literal_column(str(index), sa.Integer).label('k')]
            for j, col in enumerate(columns):
                if start <= j < start + width:
                    exprs.append(own[j - start].label('c%d' % j))
                else:
                    exprs.append(
                        sa.cast(sa.null(), col.type).label('c%d' % j))
            parts.append(selects[name].with_only_columns(
                *exprs, maintain_column_froms=True))
        self.makers = [
            collections.namedtuple(
                'Row', [c.key for c in selects[n].selected_columns])._make
            for n in names]
        self.statement = (parts[0] if len(parts) == 1
                          else sa.union_all(*parts))

    def run(self, ctx, params=None):
        """{name: [row]} (each row a namedtuple of that select's column
        keys) in ``ctx``'s session, with bound ``params``."""
        names, spans, makers = self.names, self.spans, self.makers
        found = {name: [] for name in names}
        lists = [found[name] for name in names]
        for row in ctx.session.execute(self.statement, params or {}):
            index = row[0]
            start, width = spans[index]
            lists[index].append(
                makers[index](row[1 + start:1 + start + width]))
        return found


def select_many(ctx, **selects):
    """Run the named SELECTs once (see Many); {name: [row]}."""
    return Many(**selects).run(ctx)
