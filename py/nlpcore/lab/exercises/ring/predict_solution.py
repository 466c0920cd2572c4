# Predict before you simulate: ring attention over P devices, ONE head, float32, forward pass.
N = 512       # sequence length (queries = keys = N), cut into P contiguous shards
d = 64        # head dimension (dv = d)
P = 4         # devices in the ring
BYTES = 4     # float32
# Each device keeps its Q shard, its running output O and the row statistics (m, l) of its
# queries; the K/V shards travel: after each step every device sends the K and V shard it holds
# to the next device, while it receives the next one (so two K/V shards are resident at once).
# SOLUTION BEGIN
# # Replace the two None's with numbers (or formulas in N, d, P, BYTES). Within 10% passes.  STARTER
# bytes_sent = None       # bytes ONE device sends during the whole forward pass  STARTER
# peak_elements = None    # elements ONE device holds at once, at its busiest step  STARTER
n = N // P    # rows per shard

# A K/V shard is n rows of K and n rows of V; it is passed on after every step but the last.
bytes_sent = (P - 1) * n * (d + d) * BYTES
# Q shard + running O + (m, l) per query row + the K/V shard in use + the one arriving.
peak_elements = n * d + n * d + 2 * n + 2 * n * (d + d)
# SOLUTION END
