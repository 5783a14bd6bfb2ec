"""Rebuild pre-flight check: can the instance keep its host with a new image?

The rule of nova's "Support traits in Glance" spec: rather than ask
placement for new candidates (the current host may be full and so drop
out), read the consumer's current allocations, gather the traits of every
provider it holds allocations on, and fail if any trait the new image
requires is missing from that set. Only providers the consumer actually
allocates from count: a trait on a sibling or child provider it does not
use (the other SR-IOV NIC of the spec's example) does not satisfy the image,
because nothing guarantees the instance's resources come from it.
"""
from placement_request import request as rq


class RebuildCheckResult:

    def __init__(self, consumer_uuid, required, provider_traits, warnings):
        self.consumer_uuid = consumer_uuid
        self.required = set(required)
        # rp uuid -> set of traits, for the providers allocated from.
        self.provider_traits = provider_traits
        self.warnings = list(warnings)
        held = set()
        for traits in provider_traits.values():
            held |= traits
        self.available = held
        self.missing = self.required - held

    @property
    def passed(self):
        return not self.missing

    def __bool__(self):
        return self.passed

    def explain(self):
        if not self.required:
            return 'PASS: the image requires no traits'
        if not self.provider_traits:
            return ('FAIL: consumer %s holds no allocations; missing '
                    'traits: %s' % (self.consumer_uuid,
                                    ', '.join(sorted(self.missing))))
        if self.passed:
            return ('PASS: the %d provider(s) consumer %s allocates from '
                    'carry every required trait (%s)' % (
                        len(self.provider_traits), self.consumer_uuid,
                        ', '.join(sorted(self.required))))
        return ('FAIL: missing traits: %s (not on any of the %d '
                'provider(s) consumer %s allocates from)' % (
                    ', '.join(sorted(self.missing)),
                    len(self.provider_traits), self.consumer_uuid))

    def as_dict(self):
        return {'consumer_uuid': self.consumer_uuid,
                'result': 'pass' if self.passed else 'fail',
                'required_traits': sorted(self.required),
                'missing_traits': sorted(self.missing),
                'providers': {rp: sorted(t) for rp, t in
                              sorted(self.provider_traits.items())},
                'warnings': self.warnings}


def rebuild_check(client, consumer_uuid, image_properties):
    """Check the new image's required traits against the providers the
    consumer holds allocations on. ``image_properties`` is a dict of image
    properties or an already parsed ``ImageTraits``."""
    image = image_properties
    if not isinstance(image, rq.ImageTraits):
        image = rq.parse_image_properties(image_properties)
    if not image.required:
        # As nova's conductor: nothing to check, no calls made.
        return RebuildCheckResult(consumer_uuid, set(), {}, image.warnings)
    allocations = client.get_allocations(consumer_uuid).get('allocations')
    provider_traits = {rp: client.get_provider_traits(rp)
                       for rp in sorted(allocations or {})}
    return RebuildCheckResult(consumer_uuid, image.required, provider_traits,
                              image.warnings)
