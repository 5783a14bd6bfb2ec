"""Domain errors raised by the objects layer.

Objects never see a request: they raise these, and ``placement.wsgify``
turns each into an HTTP error in upstream's JSON format, in one place. The
status and error code travel with the class; the message is the detail text
clients see and match.
"""
from placement import errors


class PlacementError(Exception):
    status = 500
    code = None          # an errors.* code; None means the default code
    msg_fmt = 'An unknown exception occurred.'

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError, ValueError):
                message = self.msg_fmt
        self.message = message
        super().__init__(message)

    def format_message(self):
        return self.message


class BadRequest(PlacementError):
    status = 400
    msg_fmt = 'Bad request.'


class Forbidden(PlacementError):
    status = 403
    msg_fmt = 'Forbidden.'


class PolicyNotAuthorized(Forbidden):
    msg_fmt = 'Policy does not allow %(action)s to be performed.'


class NotFound(PlacementError):
    status = 404
    msg_fmt = 'Resource could not be found.'


class Conflict(PlacementError):
    status = 409
    msg_fmt = 'Conflict.'


class ConcurrentUpdateDetected(Conflict):
    code = errors.CONCURRENT_UPDATE
    msg_fmt = ('Another thread concurrently updated the data. '
               'Please retry your update')


class ResourceProviderConcurrentUpdateDetected(ConcurrentUpdateDetected):
    msg_fmt = ('Another thread concurrently updated the resource provider '
               'data. Please retry your update')


class DatabaseUnavailable(PlacementError):
    status = 503
    msg_fmt = ('The placement database is unavailable. '
               'Please retry in a moment.')


class ResourceProviderNotFound(NotFound):
    msg_fmt = 'No resource provider with uuid %(uuid)s found'


class ResourceClassNotFound(NotFound):
    msg_fmt = 'No such resource class %(resource_class)s.'


class TraitNotFound(NotFound):
    msg_fmt = 'No such trait(s): %(names)s.'


class ConsumerNotFound(NotFound):
    msg_fmt = 'No consumer with UUID %(uuid)s found.'


class ResourceClassExists(Conflict):
    msg_fmt = 'Resource class %(resource_class)s already exists.'


class ResourceClassInUse(Conflict):
    msg_fmt = ('Cannot delete resource class %(resource_class)s. '
               'Class is in use in inventory.')


class ResourceClassCannotDeleteStandard(BadRequest):
    msg_fmt = 'Cannot delete standard resource class %(resource_class)s.'


class ResourceClassCannotUpdateStandard(BadRequest):
    msg_fmt = 'Cannot update standard resource class %(resource_class)s.'


class TraitExists(Conflict):
    msg_fmt = 'The Trait %(name)s already exists'


class TraitInUse(Conflict):
    msg_fmt = 'The trait %(name)s is in use by a resource provider.'


class TraitCannotDeleteStandard(BadRequest):
    msg_fmt = 'Cannot delete standard trait %(name)s.'


class ResourceProviderInUse(Conflict):
    code = errors.PROVIDER_IN_USE
    msg_fmt = 'Resource provider has allocations.'


class CannotDeleteParentResourceProvider(Conflict):
    code = errors.PROVIDER_CANNOT_DELETE_PARENT
    msg_fmt = ('Cannot delete resource provider that is a parent of '
               'another. Delete child providers first.')


class ResourceProviderExists(Conflict):
    """uuid or name already taken; ``duplicates`` is e.g. 'name: foo'."""
    code = errors.DUPLICATE_NAME
    msg_fmt = 'Conflicting resource provider %(duplicates)s already exists.'


class ObjectActionError(BadRequest):
    msg_fmt = 'Object action %(action)s failed because: %(reason)s'


class InventoryInUse(Conflict):
    code = errors.INVENTORY_INUSE
    msg_fmt = ("Inventory for '%(resource_classes)s' on "
               "resource provider '%(resource_provider)s' in use.")


class InventoryWithResourceClassNotFound(NotFound):
    msg_fmt = 'No inventory of class %(resource_class)s found.'


class InvalidInventoryCapacity(BadRequest):
    msg_fmt = ("Invalid inventory for '%(resource_class)s' on "
               "resource provider '%(resource_provider)s'. "
               "The reserved value is greater than or equal to total.")


class InvalidInventoryCapacityReservedCanBeTotal(InvalidInventoryCapacity):
    msg_fmt = ("Invalid inventory for '%(resource_class)s' on "
               "resource provider '%(resource_provider)s'. "
               "The reserved value is greater than total.")


class InventoryExists(Conflict):
    code = errors.CONCURRENT_UPDATE
    msg_fmt = ("Inventory for '%(resource_class)s' on "
               "resource provider '%(resource_provider)s' already exists.")
