int cudaSetDevice(int device);
