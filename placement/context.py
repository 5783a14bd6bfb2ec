"""The request context: who is asking, and the database session for it."""
from oslo_context import context
from oslo_db.sqlalchemy import enginefacade

from placement import exception
from placement import policy


@enginefacade.transaction_context_provider
class RequestContext(context.RequestContext):

    def __init__(self, *args, **kwargs):
        self.config = kwargs.pop('config', None)
        super().__init__(*args, **kwargs)

    def can(self, action, target=None, fatal=True):
        """Is this context allowed ``action``? Raise 403 when fatal."""
        if target is None:
            target = {'project_id': self.project_id,
                      'user_id': self.user_id}
        try:
            return policy.authorize(self, action, target)
        except exception.PolicyNotAuthorized:
            if fatal:
                raise
            return False


def admin_context(config=None):
    """A context for commands and start-up work that need no policy."""
    return RequestContext(is_admin=True, config=config)
