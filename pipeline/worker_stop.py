"""A stop request a worker answers within a second, not a minute.

RQ listens for its commands (shut down, stop or kill the job) in a pub/sub thread that
waits up to `sleep_time` for a message; RQ asks for 60 s. Once that thread has read the
reply to the worker's unsubscribe, it waits that long for a subscription that never
comes, and since redis-py 8 stopping the thread waits for it. A warm shutdown of an idle
worker then took up to a minute: past the supervisor's 30 s grace, so it ended cold.
Listening in waits of a second bounds it, for a wake-up a second per idle worker.
"""

from rq.worker import BaseWorker

LISTEN_SECONDS = 1.0


class PromptStop:
    """Mixed into an RQ worker class: its command listener waits at most LISTEN_SECONDS."""

    def subscribe(self: BaseWorker) -> None:
        self.log.info("Worker %s: subscribing to channel %s", self.name, self.pubsub_channel_name)
        self.pubsub = self.connection.pubsub()
        self.pubsub.subscribe(**{self.pubsub_channel_name: self.handle_payload})
        self.pubsub_thread = self.pubsub.run_in_thread(
            sleep_time=LISTEN_SECONDS,
            daemon=True,
            exception_handler=self._pubsub_exception_handler,
        )
