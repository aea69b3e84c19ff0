"""What the explorer keeps: a bounded mapping of the latest entries asked for, so that a click back
recomputes nothing while memory stays bounded however long the explorer serves."""

from collections import OrderedDict


class Kept(OrderedDict):
    """A mapping of at most `most` entries: adding one more drops the one added or asked for
    longest ago (`latest` marks an entry as asked for)."""

    def __init__(self, most: int):
        super().__init__()
        self.most = most

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.latest(key)
        while len(self) > self.most:
            self.popitem(last=False)

    def latest(self, key):
        self.move_to_end(key)
        return self[key]
