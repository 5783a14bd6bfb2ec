"""Build a GET /allocation_candidates request from a flavor and an image.

This follows nova's scheduler: the flavor's extra specs give resources and
traits per request group (``resources[SUFFIX]:CLASS=N``,
``trait[SUFFIX]:NAME=required|forbidden``, ``group_policy``), the image's
properties add required traits (``trait:NAME=required``) to the unnumbered
group only (nova spec "Support traits in Glance", Rocky), and aggregate
constraints come from the caller, as nova's request filters add them
(``member_of``, including forbidden aggregates from microversion 1.32).

Unlike nova, which logs and drops malformed extra specs, every malformed
entry raises ``InvalidSpec`` naming the key: an operator tool should say
what is wrong rather than quietly schedule on a different request.
"""
import copy
import logging
import re
import urllib.parse
import uuid

from placement_request import exceptions

LOG = logging.getLogger(__name__)

# The newest placement microversion whose query syntax this module knows.
LATEST = (1, 39)

# What each query feature needs, as (major, minor).
NEEDS = {
    'GET /allocation_candidates': (1, 10),
    'limit': (1, 16),
    'required traits': (1, 17),
    'member_of': (1, 21),
    'forbidden traits': (1, 22),
    'more than one member_of in a request group': (1, 24),
    'numbered request groups': (1, 25),
    'group_policy': (1, 25),
    'forbidden aggregates (member_of=!...)': (1, 32),
    'non-numeric request group suffixes': (1, 33),
    'root_required': (1, 35),
    'request groups without resources': (1, 36),
}

# nova's pattern for flavor keys: a prefix, an optional suffix naming the
# request group, a colon, then the resource class or trait name.
_SPEC_KEY = re.compile(r'^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$')
# Placement's rule for resource class and trait names.
_NAME = re.compile(r'^[A-Z0-9_]{1,255}$')
_SUFFIX = re.compile(r'^[a-zA-Z0-9_-]{1,64}$')
_NUMERIC_SUFFIX = re.compile(r'^[1-9][0-9]*$')
GROUP_POLICIES = ('none', 'isolate')
TRAIT_VALUES = ('required', 'forbidden')


def parse_version(version):
    """``'1.25'``, ``(1, 25)`` or ``'latest'`` -> ``(1, 25)``."""
    if version is None or version == 'latest':
        return LATEST
    if isinstance(version, tuple):
        major, minor = version
    else:
        match = re.match(r'^([1-9][0-9]*)\.([0-9]+)$', str(version).strip())
        if not match:
            raise ValueError(
                'Invalid microversion %r: expected MAJOR.MINOR such as 1.36 '
                'or "latest"' % (version,))
        major, minor = int(match.group(1)), int(match.group(2))
    return (int(major), int(minor))


def format_version(version):
    return '%d.%d' % tuple(version)


class RequestGroup:
    """One request group: resources and traits from one provider (numbered
    groups) or from anywhere in one tree plus sharing providers (the
    unnumbered group, suffix ``''``)."""

    def __init__(self, suffix=''):
        self.suffix = suffix
        self.resources = {}
        self.required_traits = set()
        self.forbidden_traits = set()
        # A list of sets: the provider must be in at least one aggregate of
        # each set.
        self.member_of = []
        self.forbidden_aggregates = set()

    @property
    def numbered(self):
        return self.suffix != ''

    def is_empty(self):
        return not (self.resources or self.required_traits
                    or self.forbidden_traits or self.member_of
                    or self.forbidden_aggregates)

    def __repr__(self):
        return ('RequestGroup(suffix=%r, resources=%r, required=%r, '
                'forbidden=%r, member_of=%r, forbidden_aggregates=%r)' % (
                    self.suffix, self.resources, sorted(self.required_traits),
                    sorted(self.forbidden_traits),
                    [sorted(a) for a in self.member_of],
                    sorted(self.forbidden_aggregates)))

    def query_params(self):
        """This group's (key, value) pairs, in nova's spelling."""
        params = []
        if self.resources:
            params.append(('resources' + self.suffix, ','.join(
                '%s:%d' % (rc, amount)
                for rc, amount in sorted(self.resources.items()))))
        traits = (sorted(self.required_traits)
                  + ['!' + t for t in sorted(self.forbidden_traits)])
        if traits:
            params.append(('required' + self.suffix, ','.join(traits)))
        for aggs in sorted(sorted(a) for a in self.member_of):
            params.append(('member_of' + self.suffix, 'in:' + ','.join(aggs)))
        if self.forbidden_aggregates:
            params.append(('member_of' + self.suffix, '!in:' + ','.join(
                sorted(self.forbidden_aggregates))))
        return params


class ImageTraits:
    """The traits an image requires, and what was ignored on the way."""

    def __init__(self, required=(), warnings=()):
        self.required = set(required)
        self.warnings = list(warnings)

    def __repr__(self):
        return 'ImageTraits(required=%r)' % sorted(self.required)


def _check_name(name, key, what, source):
    if not _NAME.match(name):
        raise exceptions.InvalidSpec(
            key, '%r is not a valid %s name: use only A-Z, 0-9 and _ '
            '(e.g. CUSTOM_FOO)' % (name, what), source=source)


def parse_image_properties(properties):
    """Image properties -> ImageTraits.

    Only ``trait:NAME=required`` counts. A numbered or suffixed trait key
    (``trait1:NAME``) is ignored with a warning: the image cannot be
    reconciled with the flavor's granular groups, so the spec supports the
    unnumbered group only. Properties outside the ``trait`` namespace
    (``hw_*``, ``os_distro``, ...) are not ours and are ignored silently.
    """
    source = 'image property'
    required = set()
    warnings = []
    for key, value in (properties or {}).items():
        match = _SPEC_KEY.match(key)
        if match is None:
            if key.startswith('trait') and ':' in key:
                raise exceptions.InvalidSpec(
                    key, 'malformed trait key: expected trait:NAME',
                    source=source)
            continue
        prefix, suffix, name = match.groups()
        if prefix != 'trait':
            continue
        if suffix:
            text = ('Ignoring image property %s=%s: only the unnumbered '
                    '"trait:" group is supported for images' % (key, value))
            LOG.warning(text)
            warnings.append(text)
            continue
        _check_name(name, key, 'trait', source)
        if value != 'required':
            raise exceptions.InvalidSpec(
                key, 'the only valid value for an image trait is '
                '"required", got %r' % (value,), source=source)
        required.add(name)
    return ImageTraits(required, warnings)


def _parse_amount(key, value, source='flavor extra spec'):
    text = str(value).strip()
    if not re.match(r'^[0-9]+$', text):
        raise exceptions.InvalidSpec(
            key, 'resource amount must be a non-negative integer, got %r'
            % (value,), source=source)
    return int(text)


def parse_member_of(value, key='member_of'):
    """One member_of value in placement's syntax -> (forbidden, aggregates).

    ``UUID`` and ``in:UUID,UUID`` are required (any of the list);
    ``!UUID`` and ``!in:UUID,UUID`` are forbidden (none of the list).
    ``!`` inside an ``in:`` list is refused, as placement refuses it.
    """
    text = (value or '').strip()
    forbidden = text.startswith('!')
    if forbidden:
        text = text[1:]
    if text.startswith('in:'):
        items = text[3:].split(',')
    else:
        items = [text]
        if ',' in text:
            raise exceptions.InvalidSpec(
                key, 'more than one aggregate needs the "in:" prefix '
                '(in:UUID,UUID or !in:UUID,UUID)', source='argument')
    aggs = set()
    for item in items:
        item = item.strip()
        if item.startswith('!'):
            raise exceptions.InvalidSpec(
                key, '"!" is not allowed inside an "in:" list; use '
                '!in:UUID,UUID to forbid several aggregates',
                source='argument')
        try:
            aggs.add(str(uuid.UUID(item)))
        except ValueError:
            raise exceptions.InvalidSpec(
                key, '%r is not an aggregate UUID' % (item,),
                source='argument')
    return forbidden, aggs


class ResourceRequest:
    """A whole allocation candidates request, grouped by suffix."""

    def __init__(self):
        self.groups = {}
        self.group_policy = None
        self.root_required = set()
        self.root_forbidden = set()
        self.warnings = []

    def group(self, suffix=''):
        if suffix and not _SUFFIX.match(suffix):
            raise exceptions.InvalidSpec(
                suffix, 'a request group suffix is 1-64 characters of '
                'a-z, A-Z, 0-9, _ and -', source='request group suffix')
        if suffix not in self.groups:
            self.groups[suffix] = RequestGroup(suffix)
        return self.groups[suffix]

    @property
    def unnumbered(self):
        return self.group('')

    def __repr__(self):
        return 'ResourceRequest(groups=%r, group_policy=%r)' % (
            list(self.groups.values()), self.group_policy)

    # -- building ------------------------------------------------------

    @classmethod
    def from_flavor(cls, extra_specs, vcpus=0, memory_mb=0, disk_gb=0):
        """Parse a flavor as nova does.

        ``vcpus``, ``memory_mb`` and ``disk_gb`` are the flavor's own
        fields: they seed the unnumbered group with VCPU, MEMORY_MB and
        DISK_GB; a ``resources:CLASS=N`` extra spec overrides them, and
        ``N=0`` removes the class from the request.
        """
        req = cls()
        base = {('VCPU', 'vcpus'): vcpus,
                ('MEMORY_MB', 'memory_mb'): memory_mb,
                ('DISK_GB', 'disk_gb'): disk_gb}
        for (rc, field), amount in base.items():
            amount = _parse_amount(field, amount, source='flavor field')
            if amount:
                req.unnumbered.resources[rc] = amount
        for key, value in sorted((extra_specs or {}).items()):
            req._apply_flavor_spec(key, value)
        # nova drops groups that ended up empty, e.g. resources1:VGPU=0.
        for suffix in [s for s, g in req.groups.items() if g.is_empty()]:
            del req.groups[suffix]
        return req

    def _apply_flavor_spec(self, key, value):
        if key == 'group_policy':
            if value not in GROUP_POLICIES:
                raise exceptions.InvalidSpec(
                    key, 'must be one of %s, got %r' % (
                        ', '.join(GROUP_POLICIES), value))
            self.group_policy = value
            return
        match = _SPEC_KEY.match(key)
        if match is None:
            if key.startswith(('resources', 'trait')) and ':' in key:
                raise exceptions.InvalidSpec(
                    key, 'malformed key: expected resources[SUFFIX]:CLASS '
                    'or trait[SUFFIX]:NAME, where SUFFIX is 1-64 characters '
                    'of a-z, A-Z, 0-9, _ and -')
            # Not a scheduling key nova's placement request cares about
            # (hw:*, aggregate_instance_extra_specs:*, ...).
            return
        prefix, suffix, name = match.groups()
        group = self.group(suffix or '')
        if prefix == 'resources':
            _check_name(name, key, 'resource class', 'flavor extra spec')
            amount = _parse_amount(key, value)
            if amount:
                group.resources[name] = amount
            else:
                group.resources.pop(name, None)
        else:
            _check_name(name, key, 'trait', 'flavor extra spec')
            if value == 'required':
                group.required_traits.add(name)
            elif value == 'forbidden':
                group.forbidden_traits.add(name)
            else:
                raise exceptions.InvalidSpec(
                    key, 'trait value must be "required" or "forbidden", '
                    'got %r' % (value,))

    def add_member_of(self, aggregates, suffix=''):
        """Require membership in at least one of ``aggregates``."""
        aggs = set(aggregates)
        if aggs:
            self.group(suffix).member_of.append(aggs)

    def add_forbidden_aggregates(self, aggregates, suffix=''):
        """Exclude providers in any of ``aggregates`` (microversion 1.32)."""
        self.group(suffix).forbidden_aggregates.update(aggregates)

    def add_member_of_spec(self, value, suffix='', key='member_of'):
        """Add one member_of value in placement's syntax (see
        ``parse_member_of``)."""
        forbidden, aggs = parse_member_of(value, key=key)
        if forbidden:
            self.add_forbidden_aggregates(aggs, suffix)
        else:
            self.add_member_of(aggs, suffix)

    def add_root_trait(self, value, key='root_required'):
        """``TRAIT`` or ``!TRAIT`` the root provider of every candidate
        must have or lack (1.35), as nova's compute-status filter adds
        ``!COMPUTE_STATUS_DISABLED``."""
        forbidden = value.startswith('!')
        name = value[1:] if forbidden else value
        _check_name(name, key, 'trait', 'argument')
        mine, other = ((self.root_forbidden, self.root_required) if forbidden
                       else (self.root_required, self.root_forbidden))
        if name in other:
            raise exceptions.InvalidSpec(
                key, '%s is both required and forbidden on the root '
                'provider' % name, source='argument')
        mine.add(name)

    def with_image(self, image):
        """A new request: this flavor request plus the image's traits.

        The image's required traits join the unnumbered group's required
        traits (a union). A trait the image requires and the flavor's
        unnumbered group forbids is a contradiction nobody can satisfy, so
        it raises ``TraitConflict`` instead of picking a side.
        """
        if isinstance(image, dict):
            image = parse_image_properties(image)
        merged = copy.deepcopy(self)
        merged.warnings.extend(image.warnings)
        if not image.required:
            return merged
        group = merged.unnumbered
        conflicts = image.required & group.forbidden_traits
        if conflicts:
            raise exceptions.TraitConflict(conflicts)
        group.required_traits |= image.required
        return merged

    # -- rendering -----------------------------------------------------

    def needed_microversion(self, limit=None):
        """The lowest microversion able to express this request."""
        return max([NEEDS[f] for f in self._features(limit)]
                   or [NEEDS['GET /allocation_candidates']])

    def _features(self, limit):
        features = ['GET /allocation_candidates']
        if limit is not None:
            features.append('limit')
        for group in self.groups.values():
            if group.required_traits:
                features.append('required traits')
            if group.forbidden_traits:
                features.append('forbidden traits')
            if group.member_of or group.forbidden_aggregates:
                features.append('member_of')
            if len(group.member_of) + bool(group.forbidden_aggregates) > 1:
                features.append('more than one member_of in a request group')
            if group.forbidden_aggregates:
                features.append('forbidden aggregates (member_of=!...)')
            if group.numbered:
                features.append('numbered request groups')
                if not _NUMERIC_SUFFIX.match(group.suffix):
                    features.append('non-numeric request group suffixes')
            if not group.resources:
                features.append('request groups without resources')
        if self.group_policy is not None:
            features.append('group_policy')
        if self.root_required or self.root_forbidden:
            features.append('root_required')
        return features

    def validate(self, version=LATEST, limit=None):
        """Raise if this request cannot be sent at ``version``."""
        version = parse_version(version)
        for feature in self._features(limit):
            if version < NEEDS[feature]:
                raise exceptions.UnsupportedByMicroversion(
                    feature, NEEDS[feature], version)
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise exceptions.InvalidSpec(
                'limit', 'must be a positive integer, got %r' % (limit,),
                source='argument')
        if not any(g.resources for g in self.groups.values()):
            raise exceptions.InvalidSpec(
                'resources', 'the request asks for no resources: give the '
                'flavor vcpus/memory/disk or resources:CLASS=N extra specs')
        numbered = [g for g in self.groups.values() if g.numbered]
        if len(numbered) > 1 and self.group_policy is None:
            raise exceptions.InvalidSpec(
                'group_policy', 'required (none or isolate) when the flavor '
                'has more than one numbered request group (%s)' % ', '.join(
                    sorted(g.suffix for g in numbered)))

    def query_params(self, version=LATEST, limit=None):
        """The (key, value) pairs of the query, sorted as nova sends them."""
        self.validate(version, limit)
        params = []
        if limit is not None:
            params.append(('limit', str(limit)))
        if self.group_policy is not None:
            params.append(('group_policy', self.group_policy))
        if self.root_required or self.root_forbidden:
            params.append(('root_required', ','.join(
                sorted(self.root_required)
                + ['!' + t for t in sorted(self.root_forbidden)])))
        for group in self.groups.values():
            params.extend(group.query_params())
        return sorted(params)

    def to_querystring(self, version=LATEST, limit=None):
        """The exact query string of GET /allocation_candidates (without
        the ``?``), URL-encoded as nova encodes it."""
        return urllib.parse.urlencode(self.query_params(version, limit))


def build_request(flavor_specs=None, image_properties=None, vcpus=0,
                  memory_mb=0, disk_gb=0, member_of=()):
    """Flavor + image + aggregate constraints -> ResourceRequest.

    ``member_of`` is a list of placement-syntax values for the unnumbered
    group (``UUID``, ``in:A,B``, ``!UUID``, ``!in:A,B``).
    """
    req = ResourceRequest.from_flavor(flavor_specs or {}, vcpus=vcpus,
                                      memory_mb=memory_mb, disk_gb=disk_gb)
    for value in member_of:
        req.add_member_of_spec(value, key='member_of=%s' % value)
    return req.with_image(parse_image_properties(image_properties or {}))
