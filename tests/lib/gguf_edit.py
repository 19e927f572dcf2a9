"""Small edits of a GGUF file for the tests (no gguf package needed; the
layout is GGUF v2/v3: header, key/values, tensor infos, aligned data).

  gguf_edit.py poison SRC DST TENSOR ROW COL VALUE
      a copy of SRC with one element of the F32 tensor set to VALUE (nan, inf, ...)
  gguf_edit.py template SRC DST FILE
      a copy of SRC with the key tokenizer.chat_template = FILE's text added
  gguf_edit.py tensors SRC
      prints the sha256 of SRC's tensor data (the metadata left out)
"""
import struct, sys
mode, src = sys.argv[1], sys.argv[2]
dst = sys.argv[3] if len(sys.argv) > 3 else None
b = bytearray(open(src, 'rb').read())
n_t, n_kv = struct.unpack_from('<QQ', b, 8)
pos, align = 24, 32
SZ = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    global pos
    if t == 8:
        pos += 8 + struct.unpack_from('<Q', b, pos)[0]
    elif t == 9:
        et, n = struct.unpack_from('<IQ', b, pos)
        pos += 12
        for _ in range(n): skip(et)
    else:
        pos += SZ[t]
for _ in range(n_kv):
    kl = struct.unpack_from('<Q', b, pos)[0]
    key = b[pos + 8:pos + 8 + kl].decode()
    t = struct.unpack_from('<I', b, pos + 8 + kl)[0]
    pos += 12 + kl
    if key == 'general.alignment': align = struct.unpack_from('<I', b, pos)[0]
    skip(t)
kv_end = pos
info = {}
for _ in range(n_t):
    nl = struct.unpack_from('<Q', b, pos)[0]
    nm = b[pos + 8:pos + 8 + nl].decode()
    nd = struct.unpack_from('<I', b, pos + 8 + nl)[0]
    ne = struct.unpack_from('<%dQ' % nd, b, pos + 12 + nl)
    pos += 12 + nl + 8 * nd
    ty, off = struct.unpack_from('<IQ', b, pos)
    pos += 12
    info[nm] = (ne, ty, off)
data = (pos + align - 1) // align * align
if mode == 'tensors':
    import hashlib
    print(hashlib.sha256(b[data:]).hexdigest())
    sys.exit(0)
if mode == 'poison':
    name, row, col, val = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
    ne, ty, off = info[name]
    assert ty == 0, name + ' is not F32'
    struct.pack_into('<f', b, data + off + 4 * (row * ne[0] + col), val)
    out = b
elif mode == 'template':
    tmpl = open(sys.argv[4], 'rb').read()
    key = b'tokenizer.chat_template'
    kv = struct.pack('<Q', len(key)) + key + struct.pack('<IQ', 8, len(tmpl)) + tmpl
    head = bytearray(b[:kv_end]) + kv + b[kv_end:pos]
    struct.pack_into('<Q', head, 16, n_kv + 1)
    head += b'\0' * (-len(head) % align)
    out = head + b[data:]
else:
    sys.exit('gguf_edit.py: unknown mode ' + mode + ' (poison, template, tensors)')
open(dst, 'wb').write(out)
