def double(t):
    return t * 2  # L:double (user code too, so the multiply resolves here, not to the caller)
