/* ONNX TensorProto files (the input_K.pb / output_K.pb of ONNX test data) read and written by
 * hand: the few fields a dense tensor needs (dims, data_type, name, raw_data and the typed
 * *_data fields), so a runner needs no protobuf library. C, so C test programs share it. */
#ifndef NNC_ONNX_TENSOR_H
#define NNC_ONNX_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NNC_PB_MAX_RANK 16

typedef struct {
  char name[256];
  int data_type; /* TensorProto.DataType (NNC_FLOAT32, ...) */
  int rank;
  int64_t dims[NNC_PB_MAX_RANK];
  void *data; /* malloc'ed, little-endian elements; free with nnc_pb_free */
  size_t bytes;
} nnc_pb_tensor;

/* Bytes per element of a TensorProto data type, 0 for those not supported here. */
size_t nnc_pb_element_size(int data_type);
/* Reads `path`. 0 on success; -1 with a message in err (which names the file). */
int nnc_pb_read(const char *path, nnc_pb_tensor *t, char *err, size_t err_len);
void nnc_pb_free(nnc_pb_tensor *t);
/* Writes a TensorProto with dims, data_type, name and raw_data. 0 on success. */
int nnc_pb_write(const char *path, const char *name, int data_type, int rank,
                 const int64_t *dims, const void *data, size_t bytes, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif
