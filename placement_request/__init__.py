"""Client-side request builder for any Placement service.

Builds GET /allocation_candidates requests from a nova flavor and a Glance
image (image traits as in nova's "Support traits in Glance" spec), asks
placement over HTTP, claims a candidate, and runs the rebuild pre-flight
check of an image's traits against a consumer's current allocations.

This package never imports the placement server code: it only needs
``requests`` (and ``keystoneauth1`` for keystone password auth).
"""
import logging

from placement_request.exceptions import ConcurrentUpdate  # noqa: F401
from placement_request.exceptions import InvalidSpec  # noqa: F401
from placement_request.exceptions import PlacementHTTPError  # noqa: F401
from placement_request.exceptions import RequestBuilderError  # noqa: F401
from placement_request.exceptions import TraitConflict  # noqa: F401
from placement_request.exceptions import UnsupportedByMicroversion  # noqa
from placement_request.request import build_request  # noqa: F401
from placement_request.request import ImageTraits  # noqa: F401
from placement_request.request import parse_image_properties  # noqa: F401
from placement_request.request import parse_member_of  # noqa: F401
from placement_request.request import RequestGroup  # noqa: F401
from placement_request.request import ResourceRequest  # noqa: F401

# A library does not decide where its warnings go; the command does.
logging.getLogger(__name__).addHandler(logging.NullHandler())
