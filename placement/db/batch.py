"""Several small SELECTs in one round trip.

A write reads a handful of short things before it writes (the owners'
ids, the consumers, their current allocations); each statement on its own
costs a round trip and SQLAlchemy's per-execution work. ``select_many``
sends them as one ``UNION ALL`` and hands each back its own rows.
"""
import collections

import sqlalchemy as sa


def select_many(ctx, **selects):
    """Run the named SELECTs (each without ORDER BY or LIMIT) as one
    statement; {name: [row]}, each row a namedtuple of that select's
    column keys.

    Every select keeps its own columns: in one select's rows the others'
    columns are NULL, cast to their types (PostgreSQL resolves the column
    types of a UNION pairwise, and two bare NULLs would become text).
    """
    names = list(selects)
    columns = []
    spans = []
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
                exprs.append(sa.cast(sa.null(), col.type).label('c%d' % j))
        parts.append(selects[name].with_only_columns(
            *exprs, maintain_column_froms=True))
    found = {name: [] for name in names}
    makers = [collections.namedtuple('Row', [c.key for c in
                                             selects[n].selected_columns])
              for n in names]
    statement = parts[0] if len(parts) == 1 else sa.union_all(*parts)
    for row in ctx.session.execute(statement):
        index = row[0]
        start, width = spans[index]
        found[names[index]].append(
            makers[index]._make(row[1 + start:1 + start + width]))
    return found
