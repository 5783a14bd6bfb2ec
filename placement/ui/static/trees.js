// The providers in memory, and Placement's tree semantics over them: the
// one place that says what a filter, a roll-up, an aggregate's capacity
// and "fullest" mean. ui.js draws; nothing there compares a trait, an
// aggregate or a usage by itself.
//
// The semantics are the API's: a provider is in an aggregate, or has a
// trait, when it does or its root does (member_of in allocation
// candidates reads a root's aggregates for its whole tree; a compute
// host's traits describe its NUMA cells); a provider's capacity counts
// where it sits in the tree, once.

// An inventory as GET /ops/ui/providers gives it:
// [total, reserved, allocation_ratio, min_unit, max_unit, step_size, used]
export const capacity = (inv) => (inv[0] - inv[1]) * inv[2];
export const pctOf = (used, cap) => (cap > 0 ? (100 * used) / cap
  : (used > 0 ? 100 : 0));

export const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

export const store = {
  byUuid: new Map(),      // uuid -> provider record
  byId: new Map(),        // database id -> uuid (removals come by id)
  children: new Map(),    // uuid -> [child record, ...] sorted by name
  roots: [],
  sorted: [],             // every record, by name
  rootOf: new Map(),      // uuid -> its root's record
  classes: [], traits: [], aggregates: [],
  rollups: new Map(),     // uuid -> {rc: [capacity, used, reserved, total]}
  peaks: new Map(),       // rc ('' any) -> uuid -> the fullest in its subtree
};

export function record(raw, traitNames, aggUuids, old) {
  return {
    id: raw.id,
    uuid: raw.uuid,
    name: raw.name,
    key: raw.name.toLowerCase(),
    generation: raw.generation,
    parent: raw.parent_provider_uuid,
    inv: raw.inventories,
    traits: raw.traits.map((i) => traitNames[i]).sort(),
    aggs: raw.aggregates.map((i) => aggUuids[i]).sort(),
    version: old ? old.version + 1 : 0,
  };
}

export function clear() {
  store.byUuid = new Map();
  store.byId = new Map();
  reindex();
}

// After any change: children, roots, the lists the filters offer; every
// cached roll-up goes (a write anywhere in a tree changes its root's).
export function reindex() {
  store.children = new Map();
  store.roots = [];
  store.rootOf = new Map();
  const classes = new Set();
  const traits = new Set();
  const aggs = new Set();
  const all = [...store.byUuid.values()].sort(byName);
  for (const rp of all) {
    if (rp.parent && store.byUuid.has(rp.parent)) {
      if (!store.children.has(rp.parent)) store.children.set(rp.parent, []);
      store.children.get(rp.parent).push(rp);
    } else {
      store.roots.push(rp);
    }
    for (const rc of Object.keys(rp.inv)) classes.add(rc);
    for (const t of rp.traits) traits.add(t);
    for (const a of rp.aggs) aggs.add(a);
  }
  const mark = (rp, root) => {
    store.rootOf.set(rp.uuid, root);
    for (const c of store.children.get(rp.uuid) || []) mark(c, root);
  };
  for (const r of store.roots) mark(r, r);
  store.sorted = all;
  store.classes = [...classes].sort();
  store.traits = [...traits].sort();
  store.aggregates = [...aggs].sort();
  store.rollups = new Map();
  store.peaks = new Map();
}

// An answer of GET /ops/ui/providers taken in: in full, or the providers
// changed since the last one. Returns the uuids that changed (none on a
// first load).
export function apply(body) {
  const changed = new Set();
  if (body.full) {
    const old = store.byUuid;
    store.byUuid = new Map();
    store.byId = new Map();
    for (const raw of body.providers) {
      const prev = old.get(raw.uuid);
      const rec = record(raw, body.trait_names, body.aggregate_uuids, prev);
      if (!prev || prev.generation !== rec.generation) changed.add(rec.uuid);
      store.byUuid.set(rec.uuid, rec);
      store.byId.set(rec.id, rec.uuid);
    }
    for (const uuid of old.keys()) {
      if (!store.byUuid.has(uuid)) changed.add(uuid);
    }
    if (old.size === 0) changed.clear();
  } else {
    for (const id of body.removed) {
      const uuid = store.byId.get(id);
      if (uuid) {
        store.byUuid.delete(uuid);
        store.byId.delete(id);
        changed.add(uuid);
      }
    }
    for (const raw of body.providers) {
      const rec = record(raw, body.trait_names, body.aggregate_uuids,
        store.byUuid.get(raw.uuid));
      store.byUuid.set(rec.uuid, rec);
      store.byId.set(rec.id, rec.uuid);
      changed.add(rec.uuid);
    }
  }
  if (body.full || changed.size) reindex();
  return changed;
}

export const rootOf = (rp) => store.rootOf.get(rp.uuid) || rp;

// --- membership, as the API reads it --------------------------------------

export function inAggregate(rp, agg) {
  return rp.aggs.includes(agg) || rootOf(rp).aggs.includes(agg);
}

export function hasTrait(rp, trait) {
  return rp.traits.includes(trait) || rootOf(rp).traits.includes(trait);
}

// --- usage ------------------------------------------------------------------

export function ownSums(rp) {
  const out = {};
  for (const [rc, inv] of Object.entries(rp.inv)) {
    out[rc] = [capacity(inv), inv[6], inv[1], inv[0]];
  }
  return out;
}

// What a provider's subtree (itself and every descendant) holds and uses,
// per class: {rc: [capacity, used, reserved, total]}.
export function rollup(uuid) {
  let out = store.rollups.get(uuid);
  if (out) return out;
  out = {};
  const add = (rc, cap, used, reserved, total) => {
    const acc = out[rc] || (out[rc] = [0, 0, 0, 0]);
    acc[0] += cap; acc[1] += used; acc[2] += reserved; acc[3] += total;
  };
  for (const [rc, v] of Object.entries(ownSums(store.byUuid.get(uuid)))) {
    add(rc, ...v);
  }
  for (const c of store.children.get(uuid) || []) {
    for (const [rc, v] of Object.entries(rollup(c.uuid))) add(rc, ...v);
  }
  store.rollups.set(uuid, out);
  return out;
}

// How full sums are: of one class, or of their fullest class; -1 for
// none of it.
export function fullness(sums, rc) {
  if (rc) return sums[rc] ? pctOf(sums[rc][1], sums[rc][0]) : -1;
  let most = -1;
  for (const [cap, used] of Object.values(sums)) {
    most = Math.max(most, pctOf(used, cap));
  }
  return most;
}

// The fullest single provider in a subtree (of class ``rc``, or of any):
// {rp, pct}. A host is as full as its fullest NUMA cell or device, not
// as the average of its tree.
export function peak(uuid, rc = '') {
  let known = store.peaks.get(rc);
  if (!known) store.peaks.set(rc, known = new Map());
  let out = known.get(uuid);
  if (out) return out;
  const rp = store.byUuid.get(uuid);
  out = { rp, pct: fullness(ownSums(rp), rc) };
  for (const c of store.children.get(uuid) || []) {
    const p = peak(c.uuid, rc);
    if (p.pct > out.pct) out = p;
  }
  known.set(uuid, out);
  return out;
}

// Sums over providers' own inventories (each counted once).
export function sumOver(rps) {
  const out = {};
  for (const rp of rps) {
    for (const [rc, inv] of Object.entries(rp.inv)) {
      const acc = out[rc] || (out[rc] = { n: 0, cap: 0, used: 0, reserved: 0, total: 0 });
      acc.n += 1; acc.cap += capacity(inv); acc.used += inv[6];
      acc.reserved += inv[1]; acc.total += inv[0];
    }
  }
  return out;
}

// --- filters ------------------------------------------------------------------

// Every filter holds on the same provider: its name or uuid, its own
// inventory of the class, its own usage over the percentage; traits and
// aggregates its own or its root's.
export function matches(rp, f) {
  if (f.text && !(rp.key.includes(f.text) || rp.uuid.startsWith(f.text))) {
    return false;
  }
  if (f.rc && !rp.inv[f.rc]) return false;
  if (f.trait && !hasTrait(rp, f.trait)) return false;
  if (f.agg && !inAggregate(rp, f.agg)) return false;
  if (f.pct !== null && !(fullness(ownSums(rp), f.rc) > f.pct)) return false;
  return true;
}

// Siblings in display order: by name, or fullest first (by the fullest
// provider in each one's subtree).
export function ordered(list, sort, rc) {
  if (sort !== 'usage') return list;
  const score = new Map(list.map((rp) => [rp, peak(rp.uuid, rc).pct]));
  return list.slice().sort((a, b) => score.get(b) - score.get(a)
    || byName(a, b));
}

// --- aggregates -----------------------------------------------------------------

// An aggregate's providers, and the rows that add up to them: a root in
// it stands for its whole tree; any other member (its root outside) for
// itself.
export function aggregateParts(agg) {
  const providers = store.sorted.filter((rp) => inAggregate(rp, agg));
  const rows = providers.filter((rp) => rp.aggs.includes(agg)
    && (rootOf(rp) === rp || !rootOf(rp).aggs.includes(agg)));
  return { providers, rows };
}

// What a row of an aggregate stands for: a root its tree, else itself.
export const rowSums = (rp) => (rootOf(rp) === rp ? rollup(rp.uuid) : ownSums(rp));
export const rowPeak = (rp, rc = '') => (rootOf(rp) === rp ? peak(rp.uuid, rc)
  : { rp, pct: fullness(ownSums(rp), rc) });
