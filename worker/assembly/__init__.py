"""The assembly room: on the worker, spans the intake published are kept by trace (``traces``), settled, and
assembled into turns (``tasks``) by ``vigil.schemas.spans``, which reads each convention through
``vigil.schemas.conventions`` (shared with the SDK's in-process span processor, so they live with the contracts);
a root that has not arrived is waited for and what a late one replaces is superseded (``late``); idle sessions
close into session turns (``sessions``)."""
