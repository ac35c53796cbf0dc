  test "parse_response correctly parses a valid response with an offset" do
    response =
      <<0::32, 1::32, 3::16, "bar"::binary, 1::32, 0::32, 0::16, 1::32, 10::64>>

    assert {:ok, %{"bar" => %{0 => %{:error_code => 0, :offsets => [10]}}}} =
             parse(response)
  end
