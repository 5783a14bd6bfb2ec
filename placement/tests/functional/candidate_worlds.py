"""Build provider worlds straight into a placement database with SQL.

Both our service and upstream's read the same schema (upstream's table
names), so one world written here can be served by either: the
differential test and the benchmark use this to compare like with like.
"""
import uuid as uuidlib

import os_resource_classes as orc
import sqlalchemy as sa

from placement.db import models
from placement.objects import changes

SHARES = 'MISC_SHARES_VIA_AGGREGATE'


class WorldBuilder:
    """Accumulate providers, inventories, traits, aggregates and usages,
    then ``write(engine)`` them in a few bulk INSERTs."""

    def __init__(self):
        self.rps = []          # dicts
        self.inv = []
        self.rpt = []          # (rp_id, trait name)
        self.rpa = []          # (rp_id, agg uuid)
        self.alloc = []        # (rp_id, rc name, used)
        self._next = 1
        self.by_name = {}

    def provider(self, name, parent=None, uuid=None):
        rp_id = self._next
        self._next += 1
        parent_row = self.by_name[parent] if parent else None
        row = {'id': rp_id, 'uuid': uuid or str(uuidlib.uuid4()),
               'name': name, 'generation': 1,
               'parent_provider_id': parent_row['id'] if parent_row else None,
               'root_provider_id': (parent_row['root_provider_id']
                                    if parent_row else rp_id)}
        self.rps.append(row)
        self.by_name[name] = row
        return row

    def inventory(self, name, rc, total, reserved=0, min_unit=1,
                  max_unit=None, step_size=1, allocation_ratio=1.0):
        self.inv.append({
            'resource_provider_id': self.by_name[name]['id'],
            'resource_class': rc, 'total': total, 'reserved': reserved,
            'min_unit': min_unit,
            'max_unit': total if max_unit is None else max_unit,
            'step_size': step_size, 'allocation_ratio': allocation_ratio})

    def trait(self, name, trait):
        self.rpt.append((self.by_name[name]['id'], trait))

    def aggregate(self, name, agg_uuid):
        self.rpa.append((self.by_name[name]['id'], agg_uuid))

    def usage(self, name, rc, used):
        self.alloc.append((self.by_name[name]['id'], rc, used))

    def write(self, engine):
        with engine.begin() as conn:
            have = {r[1]: r[0] for r in conn.execute(
                sa.select(models.RC.c.id, models.RC.c.name))}
            rows = [{'id': i, 'name': n} for i, n in enumerate(orc.STANDARDS)
                    if n not in have]
            if rows and conn.dialect.name == 'mysql':
                # VCPU's id is 0, which MySQL otherwise reads as "next".
                conn.execute(sa.text(
                    "SET SESSION sql_mode = CONCAT_WS(',', @@SESSION.sql_mode,"
                    " 'NO_AUTO_VALUE_ON_ZERO')"))
            if rows:
                conn.execute(models.RC.insert(), rows)
                have.update({r['name']: r['id'] for r in rows})
            custom = sorted({i['resource_class'] for i in self.inv} - set(have))
            nxt = max([i for i in have.values()] + [9999]) + 1
            for name in custom:
                conn.execute(models.RC.insert(), [{'id': nxt, 'name': name}])
                have[name] = nxt
                nxt += 1
            traits = {r[1]: r[0] for r in conn.execute(
                sa.select(models.TRAIT.c.id, models.TRAIT.c.name))}
            for t in sorted({t for _, t in self.rpt} - set(traits)):
                res = conn.execute(models.TRAIT.insert(), [{'name': t}])
                traits[t] = conn.execute(sa.select(models.TRAIT.c.id).where(
                    models.TRAIT.c.name == t)).scalar()
            # Aggregates already there are kept (their rows are never
            # deleted: aggregate.ids_for_uuids caches their ids).
            aggs = {r[1]: r[0] for r in conn.execute(
                sa.select(models.AGG.c.id, models.AGG.c.uuid))}
            for agg in sorted({a for _, a in self.rpa} - set(aggs)):
                conn.execute(models.AGG.insert(), [{'uuid': agg}])
                aggs[agg] = conn.execute(sa.select(models.AGG.c.id).where(
                    models.AGG.c.uuid == agg)).scalar()
            # Parents before children so the self-referencing keys hold
            # (a child may have a lower id than its parent: re-parented).
            by_id = {r['id']: r for r in self.rps}

            def depth(row):
                d = 0
                while row['parent_provider_id'] is not None:
                    row = by_id[row['parent_provider_id']]
                    d += 1
                return d
            rps = sorted(self.rps, key=lambda r: (depth(r), r['id']))
            if rps:
                conn.execute(models.RP.insert(), rps)
            if self.inv:
                conn.execute(models.INV.insert(), [
                    dict({k: v for k, v in i.items()
                          if k != 'resource_class'},
                         resource_class_id=have[i['resource_class']])
                    for i in self.inv])
            if self.rpt:
                # In trait id order: upstream lists a provider's traits in
                # the order its statement reads the links, which is
                # insertion order on PostgreSQL, id order elsewhere.
                conn.execute(models.RPT.insert(), [
                    {'resource_provider_id': rp, 'trait_id': tid}
                    for rp, tid in sorted({(rp, traits[t])
                                           for rp, t in self.rpt})])
            if self.rpa:
                conn.execute(models.RPA.insert(), [
                    {'resource_provider_id': rp, 'aggregate_id': aggs[a]}
                    for rp, a in sorted(set(self.rpa))])
            if self.alloc:
                conn.execute(models.ALLOC.insert(), [
                    {'resource_provider_id': rp, 'consumer_id':
                     str(uuidlib.uuid4()), 'resource_class_id': have[rc],
                     'used': used} for rp, rc, used in self.alloc])
            # Written in bulk: every process reloads at once (the
            # triggers have counted it too, provider by provider).
            changes.new_epoch(conn)
        return self
