/* Hand-written reader and writer of ONNX TensorProto files (see onnx_tensor.h). */
#include "onnx_tensor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t nnc_pb_element_size(int data_type) {
  switch (data_type) {
  case 2: case 3: case 9: return 1;             /* uint8, int8, bool */
  case 4: case 5: case 10: case 16: return 2;   /* uint16, int16, float16, bfloat16 */
  case 1: case 6: case 12: return 4;            /* float, int32, uint32 */
  case 7: case 11: case 13: return 8;           /* int64, double, uint64 */
  default: return 0;
  }
}

static int fail(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && len)
    vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

typedef struct {
  const uint8_t *p, *end;
  int bad;
} cursor;

static uint64_t varint(cursor *c) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (c->p >= c->end) {
      c->bad = 1;
      return 0;
    }
    uint8_t b = *c->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return v;
  }
  c->bad = 1;
  return 0;
}

/* Appends n bytes to the tensor's data. */
static int append(nnc_pb_tensor *t, const void *src, size_t n) {
  void *grown = realloc(t->data, t->bytes + n);
  if (!grown)
    return -1;
  t->data = grown;
  memcpy((char *)t->data + t->bytes, src, n);
  t->bytes += n;
  return 0;
}

int nnc_pb_read(const char *path, nnc_pb_tensor *t, char *err, size_t err_len) {
  memset(t, 0, sizeof *t);
  FILE *f = fopen(path, "rb");
  if (!f)
    return fail(err, err_len, "%s: cannot open", path);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
  if (!buf || (size > 0 && fread(buf, 1, (size_t)size, f) != (size_t)size)) {
    fclose(f);
    free(buf);
    return fail(err, err_len, "%s: cannot read", path);
  }
  fclose(f);
  cursor c = {buf, buf + size, 0};
  int typed = 0; /* a *_data field was seen: its elements convert to data_type */
  const uint8_t *raw = NULL;
  size_t rawLen = 0;
  /* Packed typed fields (elements wider than data_type may be), converted below. */
  cursor typedFields[8];
  int typedTags[8], numTyped = 0;
  while (!c.bad && c.p < c.end) {
    uint64_t key = varint(&c);
    int field = (int)(key >> 3), wire = (int)(key & 7);
    if (wire == 0) {
      uint64_t v = varint(&c);
      if (field == 1) {
        if (t->rank >= NNC_PB_MAX_RANK)
          break;
        t->dims[t->rank++] = (int64_t)v;
      } else if (field == 2) {
        t->data_type = (int)v;
      } else if (field == 4 || field == 5 || field == 7 || field == 10 || field == 11) {
        return (free(buf), fail(err, err_len, "%s: unpacked typed data is not supported", path));
      }
    } else if (wire == 2) {
      uint64_t n = varint(&c);
      if (c.bad || n > (uint64_t)(c.end - c.p)) {
        c.bad = 1;
        break;
      }
      cursor sub = {c.p, c.p + n, 0};
      if (field == 1) {
        while (!sub.bad && sub.p < sub.end && t->rank < NNC_PB_MAX_RANK)
          t->dims[t->rank++] = (int64_t)varint(&sub);
      } else if (field == 8) {
        size_t m = n < sizeof t->name - 1 ? (size_t)n : sizeof t->name - 1;
        memcpy(t->name, c.p, m);
        t->name[m] = 0;
      } else if (field == 9) {
        raw = c.p;
        rawLen = (size_t)n;
      } else if ((field == 4 || field == 5 || field == 7 || field == 10 || field == 11) &&
                 numTyped < 8) {
        typedFields[numTyped] = sub;
        typedTags[numTyped++] = field;
        typed = 1;
      }
      c.p += n;
    } else if (wire == 5) {
      c.p += 4;
    } else if (wire == 1) {
      c.p += 8;
    } else {
      c.bad = 1;
    }
    if (c.p > c.end)
      c.bad = 1;
  }
  if (c.bad) {
    free(buf);
    return fail(err, err_len, "%s: not an ONNX TensorProto (malformed protobuf)", path);
  }
  size_t es = nnc_pb_element_size(t->data_type);
  if (es == 0) {
    free(buf);
    return fail(err, err_len, "%s: data_type %d is not supported", path, t->data_type);
  }
  int64_t count = 1;
  for (int d = 0; d < t->rank; ++d)
    count *= t->dims[d];
  int ok = 0;
  if (raw) {
    ok = append(t, raw, rawLen) == 0;
  } else if (typed) {
    ok = 1;
    for (int k = 0; k < numTyped && ok; ++k) {
      cursor s = typedFields[k];
      while (ok && !s.bad && s.p < s.end) {
        uint8_t elem[8];
        if (typedTags[k] == 4) { /* float_data: fixed32 */
          if (s.end - s.p < 4)
            break;
          memcpy(elem, s.p, 4);
          s.p += 4;
        } else if (typedTags[k] == 10) { /* double_data: fixed64 */
          if (s.end - s.p < 8)
            break;
          memcpy(elem, s.p, 8);
          s.p += 8;
        } else { /* int32_data, int64_data, uint64_data: varints, truncated to the type */
          uint64_t v = varint(&s);
          memcpy(elem, &v, 8); /* little-endian: the low bytes come first */
        }
        ok = append(t, elem, es) == 0;
      }
    }
  } else {
    ok = 1; /* no data: an empty tensor */
  }
  free(buf);
  if (!ok)
    return (nnc_pb_free(t), fail(err, err_len, "%s: out of memory", path));
  if (t->bytes != (size_t)count * es) {
    size_t got = t->bytes;
    nnc_pb_free(t);
    return fail(err, err_len, "%s: %zu bytes of data for %lld elements of %zu bytes", path, got,
                (long long)count, es);
  }
  return 0;
}

void nnc_pb_free(nnc_pb_tensor *t) {
  free(t->data);
  t->data = NULL;
  t->bytes = 0;
}

static void putVarint(FILE *f, uint64_t v) {
  while (v >= 0x80) {
    fputc((int)(v & 0x7f) | 0x80, f);
    v >>= 7;
  }
  fputc((int)v, f);
}

int nnc_pb_write(const char *path, const char *name, int data_type, int rank,
                 const int64_t *dims, const void *data, size_t bytes, char *err,
                 size_t err_len) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return fail(err, err_len, "%s: cannot open for writing", path);
  for (int d = 0; d < rank; ++d) {
    putVarint(f, (1 << 3) | 0);
    putVarint(f, (uint64_t)dims[d]);
  }
  putVarint(f, (2 << 3) | 0);
  putVarint(f, (uint64_t)data_type);
  if (name && *name) {
    putVarint(f, (8 << 3) | 2);
    putVarint(f, strlen(name));
    fwrite(name, 1, strlen(name), f);
  }
  putVarint(f, (9 << 3) | 2);
  putVarint(f, bytes);
  if (bytes)
    fwrite(data, 1, bytes, f);
  if (fclose(f) != 0)
    return fail(err, err_len, "%s: write failed", path);
  return 0;
}
