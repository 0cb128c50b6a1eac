"""Webhooks for task events, delivered at least once from an outbox kept in the task records.

- `events`: which record changes make an event, the outbox entries they add to the record (in the
  same compare-and-set write), and the Standard Webhooks message each one becomes. Pure.
- `targets`: the configured endpoints and secret, checked at start, and the destination check
  (non-global addresses refused unless allowed), made on the address actually connected to.
- `sender`: one signed POST to one endpoint, and what its answer means (deliver, retry, drop).
- `delivery`: `WebhookDelivery`, the duty that sends new events at once and sweeps the store for
  the ones still pending (any replica), with bounded retries, backoff and its counters.

Only `sender` and `delivery` import the HTTP client and `standardwebhooks` (the `webhooks` extra);
the engine imports them only when webhooks are configured.
"""
