"""A small placement HTTP client on ``requests``.

Only what the request builder and the rebuild check need: discover the
microversion, ask for allocation candidates, read allocations and provider
traits, and write a consumer's allocations with consumer-generation
handling. Authentication is a token header: ``admin`` (or ``user:project``)
for a noauth2 service, or a keystone token, either given or obtained with
keystoneauth1 (see ``keystone_token``).
"""
import logging

import requests

from placement_request import exceptions
from placement_request import request as rq

LOG = logging.getLogger(__name__)

SERVICE_TYPE = 'placement'
# Consumer generations arrive with 1.28; consumer types are required from
# 1.38. Writes below 1.28 cannot be made safe, so claims refuse them.
CONSUMER_GENERATION = (1, 28)
CONSUMER_TYPES = (1, 38)
CONCURRENT_UPDATE = 'placement.concurrent_update'

# "Read the consumer's generation before each try": the default for
# put_allocations.
READ_GENERATION = object()


class Candidates:
    """The answer of GET /allocation_candidates, with the query asked."""

    def __init__(self, query, microversion, body):
        self.query = query
        self.microversion = microversion
        self.allocation_requests = body.get('allocation_requests', [])
        self.provider_summaries = body.get('provider_summaries', {})

    def __len__(self):
        return len(self.allocation_requests)

    def providers(self, index):
        """rp uuid -> resources of allocation request ``index``, whatever
        the microversion's shape (a list before 1.12, a dict after)."""
        allocations = self.allocation_requests[index]['allocations']
        if isinstance(allocations, dict):
            return {rp: a['resources'] for rp, a in allocations.items()}
        return {a['resource_provider']['uuid']: a['resources']
                for a in allocations}

    def roots(self, index):
        """The root providers (hosts) of allocation request ``index``,
        where the summaries say (1.29+), else the providers themselves."""
        roots = set()
        for rp in self.providers(index):
            summary = self.provider_summaries.get(rp, {})
            roots.add(summary.get('root_provider_uuid') or rp)
        return roots

    def as_dict(self):
        return {'query': self.query,
                'microversion': rq.format_version(self.microversion),
                'allocation_requests': self.allocation_requests,
                'provider_summaries': self.provider_summaries}


def keystone_token(auth_url, username=None, password=None, project_name=None,
                   project_id=None, user_domain_name='Default',
                   project_domain_name='Default', region_name=None,
                   interface='public', requests_session=None, **extra):
    """Password-authenticate with keystoneauth1 -> (token, placement URL
    from the catalog). ``requests_session`` carries the HTTP (tests route
    it to a fake keystone)."""
    try:
        from keystoneauth1 import exceptions as ks_exc
        from keystoneauth1.identity import v3
        from keystoneauth1 import session as ks_session
    except ImportError:  # pragma: no cover - keystoneauth1 is optional
        raise exceptions.RequestBuilderError(
            'keystone password authentication needs keystoneauth1 '
            '(pip install keystoneauth1), or pass --os-token and '
            '--placement-url')
    auth = v3.Password(auth_url=auth_url, username=username,
                       password=password, project_name=project_name,
                       project_id=project_id,
                       user_domain_name=user_domain_name,
                       project_domain_name=project_domain_name, **extra)
    sess = ks_session.Session(auth=auth, session=requests_session)
    try:
        token = sess.get_token()
        endpoint = sess.get_endpoint(service_type=SERVICE_TYPE,
                                     interface=interface,
                                     region_name=region_name)
    except ks_exc.ClientException as exc:
        raise exceptions.RequestBuilderError(
            'keystone authentication at %s failed: %s' % (auth_url, exc))
    return token, endpoint


class PlacementClient:
    """Talk to one placement endpoint.

    ``microversion`` fixes the version of every call; by default the
    client uses the newest version both it and the server speak (asked
    once from ``GET /``).
    """

    def __init__(self, endpoint, token=None, microversion=None,
                 session=None, timeout=60, retries=3):
        self.endpoint = endpoint.rstrip('/')
        self.token = token
        self.session = session or requests.Session()
        self.timeout = timeout
        self.retries = retries
        self._fixed = rq.parse_version(microversion) if microversion else None
        self._negotiated = None

    # -- plumbing ------------------------------------------------------

    @property
    def microversion(self):
        if self._fixed is not None:
            return self._fixed
        if self._negotiated is None:
            self._negotiated = min(rq.LATEST, self.server_max_version())
        return self._negotiated

    def server_max_version(self):
        body = self.request('GET', '/', microversion=False).json()
        version = (body.get('versions') or [{}])[0].get('max_version')
        if not version:
            raise exceptions.RequestBuilderError(
                '%s does not look like a placement service: GET / has no '
                'max_version' % self.endpoint)
        return rq.parse_version(version)

    def request(self, method, path, json=None, microversion=None,
                expect=(200, 201, 204), raise_for_status=True):
        """One HTTP call; error statuses become PlacementHTTPError carrying
        placement's error code and detail."""
        headers = {'Accept': 'application/json'}
        if self.token:
            headers['X-Auth-Token'] = self.token
        if microversion is not False:
            version = microversion or self.microversion
            headers['OpenStack-API-Version'] = 'placement %s' % (
                rq.format_version(rq.parse_version(version)))
        url = self.endpoint + path
        LOG.debug('%s %s', method, url)
        resp = self.session.request(method, url, json=json, headers=headers,
                                    timeout=self.timeout)
        if raise_for_status and resp.status_code not in expect:
            raise self._error(method, path, resp)
        return resp

    @staticmethod
    def _error(method, path, resp, cls=exceptions.PlacementHTTPError):
        code = detail = body = None
        try:
            body = resp.json()
            error = (body.get('errors') or [{}])[0]
            code = error.get('code')
            detail = error.get('detail') or error.get('title')
        except ValueError:
            body = resp.text
            detail = resp.text.strip()[:200] or None
        return cls(method, path, resp.status_code, code=code, detail=detail,
                   body=body)

    # -- reading -------------------------------------------------------

    def get_allocation_candidates(self, resource_request, limit=None):
        """Ask placement for candidates for a ResourceRequest. The query is
        rendered for this client's microversion, so features it lacks are
        refused before anything is sent."""
        version = self.microversion
        query = resource_request.to_querystring(version, limit)
        resp = self.request('GET', '/allocation_candidates?' + query,
                            microversion=version)
        return Candidates(query, version, resp.json())

    def get_allocations(self, consumer_uuid):
        """The consumer's allocations body: ``allocations`` keyed by
        provider uuid (empty when it has none), plus project/user and,
        from 1.28, ``consumer_generation``."""
        return self.request('GET', '/allocations/%s' % consumer_uuid).json()

    def get_provider_traits(self, rp_uuid):
        return set(self.request(
            'GET', '/resource_providers/%s/traits' % rp_uuid,
            microversion=max(self.microversion, (1, 6))).json()['traits'])

    # -- writing -------------------------------------------------------

    def put_allocations(self, consumer_uuid, allocations, project_id,
                        user_id, consumer_generation=READ_GENERATION,
                        consumer_type='INSTANCE'):
        """Write the consumer's allocations (``{rp_uuid: {CLASS: N}}``, or
        an allocation request from the candidates) safely.

        By default the consumer's current generation is read before each
        try, and a 409 ``placement.concurrent_update`` (someone else wrote
        the consumer or one of the providers meanwhile) is retried up to
        ``retries`` times. A caller passing ``consumer_generation`` (None
        for "must be a new consumer") gets exactly one try: its view is
        either right or stale, and a retry cannot fix a stale view.
        """
        version = self.microversion
        if version < CONSUMER_GENERATION:
            raise exceptions.UnsupportedByMicroversion(
                'safe allocation writes (consumer generations)',
                CONSUMER_GENERATION, version)
        if 'allocations' in allocations:
            allocations = allocations['allocations']
        body = {'allocations': {
            rp: {'resources': dict(a.get('resources', a))}
            for rp, a in allocations.items()},
            'project_id': project_id, 'user_id': user_id}
        if version >= CONSUMER_TYPES:
            body['consumer_type'] = consumer_type
        path = '/allocations/%s' % consumer_uuid
        read = consumer_generation is READ_GENERATION
        tries = self.retries + 1 if read else 1
        for attempt in range(1, tries + 1):
            if read:
                consumer_generation = self.get_allocations(
                    consumer_uuid).get('consumer_generation')
            body['consumer_generation'] = consumer_generation
            resp = self.request('PUT', path, json=body, microversion=version,
                                raise_for_status=False)
            if resp.status_code == 204:
                return attempt
            error = self._error('PUT', path, resp)
            if resp.status_code != 409 or error.code != CONCURRENT_UPDATE:
                raise error
            LOG.info('Concurrent update writing allocations of %s (try '
                     '%d of %d): %s', consumer_uuid, attempt, tries,
                     error.detail)
        raise self._error('PUT', path, resp, cls=exceptions.ConcurrentUpdate)

    def claim(self, consumer_uuid, candidates, index, project_id, user_id,
              consumer_type='INSTANCE'):
        """Write allocation request ``index`` of a Candidates answer for the
        consumer (mappings are answer-only and are not sent back)."""
        return self.put_allocations(
            consumer_uuid, candidates.providers(index), project_id, user_id,
            consumer_type=consumer_type)
