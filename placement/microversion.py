"""The microversions we speak, 1.0 to 1.39, and helpers to ask about them.

Negotiation itself is microversion-parse's middleware; handlers read
``want_version(req)`` and compare it with tuples: ``if want >= (1, 14):``.
"""
import microversion_parse

SERVICE_TYPE = 'placement'
MICROVERSION_ENVIRON = '%s.microversion' % SERVICE_TYPE

# The canonical version list. What each version changed is upstream's
# REST API version history (docs.openstack.org/placement/latest/, "REST
# API Version History"); grep the code for the tuple, e.g. "(1, 14)".
VERSIONS = ['1.%d' % minor for minor in range(0, 40)]


def max_version_string():
    return VERSIONS[-1]


def min_version_string():
    return VERSIONS[0]


def want_version(req):
    """The negotiated version of this request, a comparable Version."""
    return req.environ[MICROVERSION_ENVIRON]


def parse(version_string):
    return microversion_parse.parse_version_string(version_string)
