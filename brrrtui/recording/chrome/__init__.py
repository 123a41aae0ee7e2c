"""Chrome/Kineto traces read into the recorded model: in bulk, on two cores, event by event, and the block
brrrtui's own export adds."""
