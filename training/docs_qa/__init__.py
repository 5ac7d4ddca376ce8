"""`bench docs`: answers and abstentions of RoutedRAG configurations on documentation folders."""
