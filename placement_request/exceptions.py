"""Errors raised by placement_request.

Every input error names the key (flavor extra spec, image property or
command-line argument) that caused it, so an operator can fix the flavor or
the image without reading code.
"""


class RequestBuilderError(Exception):
    """Base class of everything this package raises on purpose."""


class InvalidSpec(RequestBuilderError, ValueError):
    """A flavor extra spec, image property or aggregate argument is wrong."""

    def __init__(self, key, message, source='flavor extra spec'):
        self.key = key
        self.source = source
        self.message = message
        super().__init__('Invalid %s %r: %s' % (source, key, message))


class TraitConflict(RequestBuilderError, ValueError):
    """The image requires a trait the flavor forbids."""

    def __init__(self, traits):
        self.traits = sorted(traits)
        keys = ', '.join('trait:%s' % t for t in self.traits)
        super().__init__(
            'Image requires trait(s) the flavor forbids: %s '
            '(image property %s=required conflicts with flavor extra spec '
            '%s=forbidden)' % (', '.join(self.traits), keys, keys))


class UnsupportedByMicroversion(RequestBuilderError, ValueError):
    """The request uses a feature the chosen microversion does not have."""

    def __init__(self, feature, needed, version):
        self.feature = feature
        self.needed = needed
        self.version = version
        super().__init__(
            '%s needs placement microversion %d.%d or later; '
            'requested %d.%d' % ((feature,) + tuple(needed) + tuple(version)))


class PlacementHTTPError(RequestBuilderError):
    """Placement answered with an error status."""

    def __init__(self, method, url, status, code=None, detail=None,
                 body=None):
        self.method = method
        self.url = url
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body
        text = '%s %s returned %d' % (method, url, status)
        if code:
            text += ' (%s)' % code
        if detail:
            text += ': %s' % detail
        super().__init__(text)


class ConcurrentUpdate(PlacementHTTPError):
    """A write kept losing to concurrent writers after all retries."""
