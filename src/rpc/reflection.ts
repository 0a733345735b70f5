import { toBinary, type DescFile } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { ReflectionService } from "@grpc/reflection";
import type { Server } from "@grpc/grpc-js";

type PackageDefinition = ConstructorParameters<typeof ReflectionService>[0];

/**
 * Serves gRPC server reflection (v1 and v1alpha) from the descriptors embedded in the generated code, so
 * grpcurl and `buf curl` work without local proto files. Every file's imports are served too.
 */
export function addReflection(server: Server, files: readonly DescFile[]): void {
  const encoded = new Map<string, Buffer>();
  const visit = (file: DescFile): void => {
    if (encoded.has(file.proto.name)) return;
    const bytes = toBinary(FileDescriptorProtoSchema, file.proto);
    encoded.set(file.proto.name, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    file.dependencies.forEach(visit);
  };
  files.forEach(visit);
  // @grpc/reflection reads only `fileDescriptorProtos` from each entry of the package definition.
  const definition = { descriptors: { fileDescriptorProtos: [...encoded.values()] } } as unknown as PackageDefinition;
  new ReflectionService(definition).addToServer(server);
}
