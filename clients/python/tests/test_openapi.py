"""The client against openapi/gatehouse.yaml: fails when the two drift apart."""

import inspect

import yaml

from gatehouse_client import ERROR_CLASSES, ERROR_CODES, OPERATIONS, AsyncGatehouse, Gatehouse, GatehouseError
from gatehouse_client.types import SCHEMAS

from conftest import OPENAPI

with open(OPENAPI, encoding="utf-8") as f:
    DESCRIPTION = yaml.safe_load(f)

FILE_OPERATIONS = {
    op["operationId"]: (method.upper(), path)
    for path, item in DESCRIPTION["paths"].items()
    for method, op in item.items()
    if method in ("get", "post", "put", "patch", "delete")
}


def public_methods(cls):
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


def test_every_operation_has_a_method_in_both_clients_and_every_method_an_operation():
    assert set(OPERATIONS) == set(FILE_OPERATIONS)
    methods = {m for (_, _, m) in OPERATIONS.values()}
    extra = {"close", "request"}
    assert public_methods(Gatehouse) == methods | extra
    assert public_methods(AsyncGatehouse) == methods | {"aclose", "request"}
    for name in methods:
        assert inspect.iscoroutinefunction(getattr(AsyncGatehouse, name)), name


def test_each_method_calls_its_operations_method_and_path():
    for operation_id, (method, path) in FILE_OPERATIONS.items():
        assert OPERATIONS[operation_id][:2] == (method, path), operation_id


def test_the_error_codes_are_the_enum_each_with_its_own_class():
    codes = DESCRIPTION["components"]["schemas"]["ErrorCode"]["enum"]
    assert sorted(ERROR_CODES) == sorted(codes)
    assert len(set(ERROR_CLASSES.values())) == len(codes)
    assert all(issubclass(c, GatehouseError) and c is not GatehouseError for c in ERROR_CLASSES.values())


def test_the_typed_shapes_have_the_schemas_fields():
    schemas = DESCRIPTION["components"]["schemas"]
    for name, typed in SCHEMAS.items():
        schema = schemas[name]
        assert set(typed.__annotations__) == set(schema["properties"]), name
        assert set(typed.__required_keys__) == set(schema.get("required", [])), name
