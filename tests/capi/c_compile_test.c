/* The C API's header compiles as C11 with every warning an error, and the library links
 * and answers from C: the version, a NULL handle's status, a context, a tensor round trip. */
#include <stdio.h>
#include <string.h>

#include "capi/sluice_c_api.h"

int main(void) {
  if (sluice_api_version() != SLUICE_C_API_VERSION) return 1;
  SluiceStatus* status = sluice_context_sync(NULL);
  if (sluice_status_code(status) != SLUICE_INVALID_ARGUMENT) return 2;
  if (strlen(sluice_status_message(status)) == 0) return 3;
  sluice_status_release(status);

  SluiceContext* context = NULL;
  if (sluice_context_create(NULL, &context) != NULL) return 4;
  const int32_t values[3] = {7, -8, 9};
  const int64_t shape[1] = {3};
  SluiceTensor* tensor = NULL;
  if (sluice_tensor_create(context, SLUICE_I32, shape, 1, values, sizeof values, "sim:1",
                           &tensor) != NULL) {
    return 5;
  }
  int32_t back[3] = {0, 0, 0};
  if (sluice_tensor_read(tensor, back, sizeof back) != NULL) return 6;
  sluice_tensor_release(tensor);
  sluice_context_release(context);
  if (memcmp(values, back, sizeof back) != 0) return 7;
  puts("OK");
  return 0;
}
